#!/usr/bin/env bash
# Start-up and end of `sluice run`: the whole process's wall time on a trace
# of 20 packets (made here: TrafficGen -> PcapSink), where nearly all of it
# is starting and stopping; by hand:
#
#   tests/bench/bench_startup.sh            (REPS=15 by default)
#
# Variants, interleaved (rep 1: a b c ..., rep 2: b c ... a):
#   check          `sluice check` of the probe's graph: the binary's own
#                  start (its libraries linked, the graph parsed and
#                  checked), no DPDK
#   run-interp     `sluice run --no-jit`: the probe's graph on the trace
#                  (RSSSource(pcap) -> Timestamp -> Filter -> FlowTable ->
#                  GCSlicer -> IPFIXExporter to a loopback socket bound
#                  here and never read)
#   run-jit        the same, `--jit` (the default: compiling in the background)
# BASE=path/to/an/older/sluice adds base-check, base-interp, base-jit: the
# same run by that binary, side by side.
# LOAD=N: N busy loops (at the default priority) run beside the measured
# runs, as other work on a busy machine.
# Reported: the median and the lowest of each, in ms. These machines are
# shared and noisy: compare the figures of one run.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE=${SLUICE:-build/engine/sluice}
REPS=${REPS:-15}
BASE=${BASE:-}
LOAD=${LOAD:-0}
TMP=$(mktemp -d)
SINK=""
BUSY=()
trap '[ -z "$SINK" ] || kill "$SINK" 2> /dev/null; [ ${#BUSY[@]} = 0 ] || kill "${BUSY[@]}" 2> /dev/null; rm -rf "$TMP"' EXIT
source tests/bench/udp_sink.sh
start_udp_sink

cat > "$TMP/make.pipe" <<PIPE
TrafficGen(flows 10, new_flows_per_s 10, sizes imix, duration 2s, seed 3) -> Head(20) -> PcapSink("$TMP/tiny.pcap");
PIPE
"$SLUICE" run -q --no-jit "$TMP/make.pipe" > /dev/null
cat > "$TMP/probe.pipe" <<PIPE
RSSSource(device "pcap:$TMP/tiny.pcap") -> Timestamp(clock pcap) -> Filter("ip or ip6")
  -> ft :: FlowTable(capacity 1M, idle 15s, active 30min) -> GCSlicer(table ft) -> IPFIXExporter(127.0.0.1:$PORT);
PIPE

read -r -a VARS <<< "check run-interp run-jit${BASE:+ base-check base-interp base-jit}"
run_variant() {
  case $1 in
    check) "$SLUICE" check "$TMP/probe.pipe";;
    run-interp) "$SLUICE" run -q --no-jit "$TMP/probe.pipe";;
    run-jit) "$SLUICE" run -q --jit "$TMP/probe.pipe";;
    base-check) "$BASE" check "$TMP/probe.pipe";;
    base-interp) "$BASE" run -q --no-jit "$TMP/probe.pipe";;
    base-jit) "$BASE" run -q --jit "$TMP/probe.pipe";;
  esac
}
ms() {
  local s e
  s=$(date +%s%N)
  run_variant "$1" > "$TMP/out.txt" 2>&1 || { echo "$1 failed:" >&2; tail -5 "$TMP/out.txt" >&2; exit 1; }
  e=$(date +%s%N)
  echo $(((e - s) / 1000000))
}
for v in "${VARS[@]}"; do ms "$v" > /dev/null; done  # the page cache holds the binaries
for ((i = 0; i < LOAD; i++)); do
  bash -c 'while :; do :; done' &
  BUSY+=($!)
done
declare -A times
n=${#VARS[@]}
for ((r = 0; r < REPS; r++)); do
  for ((k = 0; k < n; k++)); do
    v=${VARS[$(((k + r) % n))]}
    times[$v]+="$(ms "$v") "
  done
done
echo "== whole process on 20 packets, ms (median and lowest of $REPS interleaved runs${BUSY[0]:+, beside $LOAD busy loops})"
printf '  %-12s %8s %8s\n' variant median lowest
for v in "${VARS[@]}"; do
  sorted=$(echo "${times[$v]}" | tr ' ' '\n' | grep . | sort -n)
  printf '  %-12s %8s %8s\n' "$v" "$(echo "$sorted" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')" \
    "$(echo "$sorted" | head -1)"
done
