#!/usr/bin/env bash
# The default probe's speed, run by hand (not a test):
#
#   tests/bench/bench_probe.sh [FLOW_COUNTS...]     (default: 10K 100K 1M)
#
# 1. Mpps per lane (1 lane, interpreter) of the default probe's path fed from
#    TrafficGen in memory: Timestamp -> FlowTable -> GCSlicer ->
#    IPFIXExporter (UDP to a closed loopback port: encoding and sending
#    included), at the given numbers of concurrent flows, with the new flows
#    per second they need, and the table's memory per flow.
# 2. A pcap file processed by sluice (2 lanes, the default probe), by
#    softflowd -r and by nfdump's nfpcapd -r, side by side on the same file in
#    the same run (Debian packages softflowd and nfdump).
# SKIP_MEMORY=1 runs part 2 only. Figures are medians of 3 runs. These machines are shared and noisy: compare
# the figures of one run with each other, not across runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE=${SLUICE:-build/engine/sluice}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(10K 100K 1M)

median() { sort -n | sed -n 2p; }
field() { grep -o "\"$2\": [0-9.e-]*" "$1" | head -1 | awk '{print $2}'; }
num() { case $1 in *K) echo $((${1%K} * 1024));; *M) echo $((${1%M} * 1048576));; *) echo "$1";; esac; }
secs() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1 || true; e=$(date +%s.%N); echo "$e - $s" | bc -l; }

if [ -z "${SKIP_MEMORY:-}" ]; then
echo "== default probe, 1 lane, TrafficGen in memory (64-byte frames)"
printf '  %-9s %-12s %-10s %-8s %-10s %s\n' "flows cap" new/s packets Mpps "B/flow" "flows"
for f in "${COUNTS[@]}"; do
  n=$(num "$f")
  # flows last ~15% of the trace at most (see engine/traffic): arrivals high
  # enough to keep about n flows active, over 4 s of trace time
  rate=$((n * 2))
  cap=$((n * 2))
  cat > "$TMP/p.pipe" <<PIPE
TrafficGen(flows $f, new_flows_per_s $rate, sizes [64B], duration 4s, seed 1)
  -> Timestamp(clock pcap) -> ft :: FlowTable(capacity $cap, idle 15s, active 30min)
  -> GCSlicer(table ft, period 1s, slices 1000) -> IPFIXExporter(127.0.0.1:9);
PIPE
  ts=()
  for i in 1 2 3; do
    "$SLUICE" run -q "$TMP/p.pipe" --stats-json "$TMP/s.json" > "$TMP/out.txt"
    ts+=("$(field "$TMP/s.json" elapsed_s)")
  done
  t=$(printf '%s\n' "${ts[@]}" | median)
  pk=$(field "$TMP/s.json" received)
  mem=$(grep -o 'active [0-9]* of [0-9]* ([0-9]* MiB)' "$TMP/out.txt" | head -1)
  recs=$(grep -o 'created [0-9]*, at most [0-9]* at once' "$TMP/out.txt" | head -1)
  mib=$(echo "$mem" | grep -o '([0-9]*' | tr -d '(')
  printf '  %-9s %-12s %-10s %-8.2f %-10s %s\n' "$f" "$rate" "$pk" "$(echo "$pk / $t / 1000000" | bc -l)" \
    "$(echo "$mib * 1048576 / $cap" | bc)" "$recs"
done

fi

echo "== a pcap file through three flow meters"
cat > "$TMP/make.pipe" <<PIPE
TrafficGen(flows 100K, new_flows_per_s 20K, sizes imix, duration 5s, seed 2) -> PcapSink("$TMP/trace.pcap");
PIPE
"$SLUICE" run -q "$TMP/make.pipe" > /dev/null
pk=$(capinfos -c -M "$TMP/trace.pcap" 2>/dev/null | awk '/Number of packets/ {print $NF}')
# the default probe as shipped (2 lanes, a ring each: 5 threads), and one
# lane without a ring (2 threads: the lane and the exporter)
cat > "$TMP/probe.pipe" <<PIPE
src :: RSSSource(device "pcap:$TMP/trace.pcap", queues 2);
exp :: shared IPFIXExporter(127.0.0.1:9);
src -> Timestamp(clock pcap) -> Ring(capacity 64K) -> Filter("ip or ip6")
    -> ft :: FlowTable(capacity 1M, idle 15s, active 30min) -> GCSlicer(table ft) -> exp;
PIPE
cat > "$TMP/probe1.pipe" <<PIPE
src :: RSSSource(device "pcap:$TMP/trace.pcap");
exp :: shared IPFIXExporter(127.0.0.1:9);
src -> Timestamp(clock pcap) -> Filter("ip or ip6")
    -> ft :: FlowTable(capacity 1M, idle 15s, active 30min) -> GCSlicer(table ft) -> exp;
PIPE
s=(); o=(); f=(); n=()
for i in 1 2 3; do
  s+=("$(secs "$SLUICE" run -q "$TMP/probe.pipe")")
  o+=("$(secs "$SLUICE" run -q "$TMP/probe1.pipe")")
  f+=("$(secs softflowd -r "$TMP/trace.pcap" -n 127.0.0.1:9 -v 10 -m 1000000 -d)")
  rm -rf "$TMP/nf" && mkdir "$TMP/nf"
  n+=("$(secs nfpcapd -r "$TMP/trace.pcap" -w "$TMP/nf")")
done
ot=$(printf '%s\n' "${o[@]}" | median); st=$(printf '%s\n' "${s[@]}" | median); ft=$(printf '%s\n' "${f[@]}" | median); nt=$(printf '%s\n' "${n[@]}" | median)
printf '  %s packets; whole process, start-up included\n' "$pk"
rate() { echo "$pk / $1 / 1000000" | bc -l; }
printf '  sluice, 1 lane          %.3f s  %.2f Mpps\n' "$ot" "$(rate "$ot")"
printf '  sluice, 2 lanes + rings %.3f s  %.2f Mpps\n' "$st" "$(rate "$st")"
printf '  softflowd               %.3f s  %.2f Mpps\n' "$ft" "$(rate "$ft")"
printf '  nfpcapd                 %.3f s  %.2f Mpps\n' "$nt" "$(rate "$nt")"
printf '  time ratios: softflowd / sluice 1 lane %.2f, nfpcapd / sluice 1 lane %.2f, softflowd / sluice 2 lanes %.2f\n' \
  "$(echo "$ft / $ot" | bc -l)" "$(echo "$nt / $ot" | bc -l)" "$(echo "$ft / $st" | bc -l)"
