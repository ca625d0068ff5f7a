#!/usr/bin/env bash
# Packet-path throughput of `sluice run` (interpreter), measured side by side
# with tcpdump on the same trace in the same run; run by hand:
#
#   tests/bench/bench_run.sh [PACKETS_MILLIONS]      (default 4)
#
# 1. TrafficGen in memory -> Counter -> Discard, 1 and 2 lanes: Mpps per lane.
# 2. The same traffic as a pcap file: sluice (net_pcap + PcapSink) vs
#    `tcpdump -r FILE -w OUT`, and with the filter "tcp and port 443" in both.
# Times are the median of 3. Figures are for comparison within one run: the
# machines this runs on are shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE=${SLUICE:-build/engine/sluice}
M=${1:-4}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# about M million packets: 64-byte frames, flows of ~9 packets
FLOWS_PER_S=$((M * 1000000 / 100))
GEN="TrafficGen(flows 100K, new_flows_per_s $FLOWS_PER_S, sizes [64B], duration 10s, seed 1"

median() { sort -n | sed -n 2p; }
elapsed() { grep -o '"elapsed_s": [0-9.e-]*' "$1" | head -1 | awk '{print $2}'; }
received() { grep -o '"received": [0-9]*' "$1" | head -1 | awk '{print $2}'; }
secs() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }

echo "== in-memory TrafficGen -> Counter -> Discard (interpreter)"
for lanes in 1 2; do
  echo "$GEN, queues $lanes) -> Counter -> Discard;" > "$TMP/mem.pipe"
  ts=()
  for i in 1 2 3; do
    "$SLUICE" run -q "$TMP/mem.pipe" --stats-json "$TMP/s.json" > /dev/null
    ts+=("$(elapsed "$TMP/s.json")")
  done
  n=$(received "$TMP/s.json")
  t=$(printf '%s\n' "${ts[@]}" | median)
  printf '  %d lane(s): %d packets in %.3f s: %.2f Mpps per lane\n' "$lanes" "$n" "$t" "$(echo "$n / $t / $lanes / 1000000" | bc -l)"
done

echo "$GEN) -> PcapSink(\"$TMP/trace.pcap\");" > "$TMP/make.pipe"
"$SLUICE" run -q "$TMP/make.pipe" > /dev/null
n=$(capinfos -c -M "$TMP/trace.pcap" 2>/dev/null | awk '/Number of packets/ {print $NF}' || true)

for filter in "" "tcp and port 443"; do
  echo "== pcap file ($n packets) read and written back${filter:+, filter \"$filter\"}"
  if [ -n "$filter" ]; then
    echo "RSSSource(device \"pcap:$TMP/trace.pcap\") -> Filter(\"$filter\") -> PcapSink(\"$TMP/out.pcap\");" > "$TMP/file.pipe"
  else
    echo "RSSSource(device \"pcap:$TMP/trace.pcap\") -> PcapSink(\"$TMP/out.pcap\");" > "$TMP/file.pipe"
  fi
  s=(); d=()
  for i in 1 2 3; do
    s+=("$(secs "$SLUICE" run -q "$TMP/file.pipe")")
    if [ -n "$filter" ]; then d+=("$(secs tcpdump -r "$TMP/trace.pcap" -w "$TMP/td.pcap" "$filter")")
    else d+=("$(secs tcpdump -r "$TMP/trace.pcap" -w "$TMP/td.pcap")"); fi
  done
  st=$(printf '%s\n' "${s[@]}" | median); dt=$(printf '%s\n' "${d[@]}" | median)
  printf '  sluice  %.3f s (whole process, EAL start included)\n  tcpdump %.3f s\n  tcpdump/sluice time ratio: %.2f\n' \
    "$st" "$dt" "$(echo "$dt / $st" | bc -l)"
done
