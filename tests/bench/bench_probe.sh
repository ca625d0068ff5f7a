#!/usr/bin/env bash
# The default probe's speed, run by hand (not a test):
#
#   tests/bench/bench_probe.sh [FLOW_COUNTS...]     (default: 10K 100K 1M)
#
# 1. Mpps per lane (1 lane, interpreter) of the default probe's path fed from
#    TrafficGen in memory: Timestamp -> FlowTable -> GCSlicer ->
#    IPFIXExporter (UDP to a closed loopback port: encoding and sending
#    included). Each point is CONCURRENCY:PROFILE. PROFILE sets the packets
#    per flow, hence the new flows per second of wall time at the lane's
#    speed:
#      short    flow_size_max 1      (~6 packets a flow: ~1M new flows/s)
#      default  TrafficGen's default (~15 packets a flow)
#      long     flow_size_alpha 0.3  (~330 packets a flow: ~10K new flows/s)
#    The table reaches a steady state of about CONCURRENCY flows: flows
#    arrive at CONCURRENCY/1.5 per second of trace time and leave 1 s after
#    their last packet (idle timeout 1 s) or on FIN/RST; the trace is long
#    enough for about 16M packets (and at least 2 s).
#    Reported: Mpps, new flows per wall second, the most flows held at once,
#    and the table's memory per flow. A point that would not fit in this
#    machine's free memory (the trace is generated into memory first) is
#    skipped with a message.
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
POINTS=("$@")
[ ${#POINTS[@]} -gt 0 ] || POINTS=(10K:default 100K:default 1M:default 10K:long 100K:long 10K:short 100K:short 1M:short 10M:short)

median() { sort -n | sed -n 2p; }
field() { grep -o "\"$2\": [0-9.e-]*" "$1" | head -1 | awk '{print $2}'; }
num() { case $1 in *K) echo $((${1%K} * 1024));; *M) echo $((${1%M} * 1048576));; *) echo "$1";; esac; }
secs() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1 || true; e=$(date +%s.%N); echo "$e - $s" | bc -l; }

if [ -z "${SKIP_MEMORY:-}" ]; then
echo "== default probe, 1 lane, TrafficGen in memory (64-byte frames), median of 3"
printf '  %-13s %-11s %-7s %-11s %-10s %s\n' point packets Mpps "new flows/s" "held max" "table B/flow"
for point in "${POINTS[@]}"; do
  c=$(num "${point%%:*}")
  profile=${point#*:}
  case $profile in
    short) shape="flow_size_max 1"; ppf=6;;
    default) shape=""; ppf=15;;
    long) shape="flow_size_alpha 0.3"; ppf=330;;
    *) echo "unknown profile '$profile' (short, default, long)" >&2; exit 2;;
  esac
  rate=$((c * 2 / 3))
  dur=$(( 16000000 / (rate * ppf) )); [ "$dur" -ge 2 ] || dur=2
  cap=$((c * 2))
  # trace: 16 B of index + 64 B per packet; 128 B ground truth per flow; 212 B per table slot (fields all, the default)
  need_mb=$(( (rate * dur * (ppf * 80 + 128) + cap * 212) / 1048576 ))
  avail_mb=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
  if [ "$need_mb" -gt $((avail_mb * 3 / 4)) ]; then
    printf '  %-13s skipped: needs about %d MiB, %d MiB available\n' "$point" "$need_mb" "$avail_mb"
    continue
  fi
  cat > "$TMP/p.pipe" <<PIPE
TrafficGen(flows 1G, new_flows_per_s $rate, sizes [64B], duration ${dur}s, seed 1 ${shape:+, $shape})
  -> Timestamp(clock pcap) -> ft :: FlowTable(capacity $cap, idle 1s, active 30min)
  -> GCSlicer(table ft, period 1s, slices 1000) -> IPFIXExporter(127.0.0.1:9);
PIPE
  ts=()
  for i in 1 2 3; do
    "$SLUICE" run -q "$TMP/p.pipe" --stats-json "$TMP/s.json" > "$TMP/out.txt"
    ts+=("$(field "$TMP/s.json" elapsed_s)")
  done
  t=$(printf '%s\n' "${ts[@]}" | median)
  pk=$(field "$TMP/s.json" received)
  mib=$(grep -o 'active [0-9]* of [0-9]* ([0-9]* MiB)' "$TMP/out.txt" | head -1 | grep -o '([0-9]*' | tr -d '(')
  made=$(grep -o 'created [0-9]*' "$TMP/out.txt" | head -1 | awk '{print $2}')
  held=$(grep -o 'at most [0-9]* at once' "$TMP/out.txt" | head -1 | awk '{print $3}')
  printf '  %-13s %-11s %-7.2f %-11.0f %-10s %s\n' "$point" "$pk" "$(echo "$pk / $t / 1000000" | bc -l)" \
    "$(echo "$made / $t" | bc -l)" "$held" "$(echo "$mib * 1048576 / $cap" | bc)"
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
