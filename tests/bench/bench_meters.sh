#!/usr/bin/env bash
# Sluice against other flow meters on a multi-million-packet real trace,
# whole process (start-up included), side by side in one run; by hand:
#
#   tests/bench/bench_meters.sh [COPIES]     (default 42: 3.24M packets, 1.07 GB)
#
# The trace: ../shared/traces/ndpi_merged.pcap (real captures, see its
# README) laid end to end COPIES times, each copy shifted by 50,000 s of
# trace time so every flow of a copy has ended before the next begins
# (editcap -t, mergecap -a), and (DISTINCT=1, the default) each copy's
# addresses XORed with a key of its own (distinct_copy.py), so that a meter
# that never times a flow out still sees each copy's flows as new ones.
# DISTINCT=0: the copies keep their addresses. Made once into $BENCH_CACHE (default
# build/bench-cache); the first run reads it from disk, so each meter runs
# once unmeasured first, then REPS (default 5) times interleaved, each
# round in an order of its own, the file read back into the page cache
# after each run.
#
# The meters, each reading the pcap and exporting flows (where it exports
# over the network, to a loopback UDP socket this script binds and never
# reads: sends succeed, the kernel drops what the socket cannot hold, no ICMP
# errors; Sluice's exporter unpaced, `rate 100Gbps`, as the others do not pace):
#   sluice-jit     the default probe's path, 1 lane: RSSSource(pcap) ->
#                  Timestamp -> Filter -> FlowTable -> GCSlicer -> IPFIXExporter, --jit;
#                  the exporter `shared`, as in the default probe: records
#                  are encoded and sent on a thread of their own, not the lane's
#   sluice-interp  the same, --no-jit
#   sluice-inlane  the same with the exporter in the lane (not `shared`: one
#                  thread does everything, as softflowd does), --no-jit; what
#                  sluice-jit and sluice-interp ran before 2026-11-29
#   sluice-2lanes  the default probe as shipped, 2 lanes with rings, --jit
#                  (each lane two threads, its reading and its metering,
#                  where the machine has a cpu for each; else, a trace being
#                  offline input, each lane runs its Ring in its one thread)
#   sluice-2rtc    2 lanes without the rings, --jit: each lane one thread
#                  that meters its share (each lane walks the whole file and
#                  keeps the packets software RSS gives it)
#   softflowd      softflowd -r FILE (Debian's), NetFlow v9 to the bound socket
#   nfpcapd        nfdump's nfpcapd -r FILE, flows to nfcapd files
# Reported: the median whole-process wall time of each, its packets per
# second, its time relative to the fastest peer (softflowd, nfpcapd): a
# ratio > 1 means Sluice is that many times faster; the median cpu time of
# the whole process (user + system, every thread: what the run cost the
# machine, where the wall time hides work done beside); and the flow records each
# exported (the first run's): the work differs. softflowd expires flows on
# wall-clock time only (its `expint`), so reading a file it never times a
# flow out: with DISTINCT=0 the copies' flows merge into flows lasting a
# million seconds; with distinct copies it holds every flow to the end.
# VARIANTS="sluice-jit softflowd" runs a subset. BASE=path/to/an/older/sluice
# adds base-jit, base-interp, base-inlane and base-2lanes, base-2rtc: the same graphs
# run by that binary, interleaved with the others: a change measured side
# by side.
# These machines are shared and noisy: compare the figures of one run.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE=${SLUICE:-build/engine/sluice}
COPIES=${1:-42}
REPS=${REPS:-5}
CACHE=${BENCH_CACHE:-build/bench-cache}
SRC=../shared/traces/ndpi_merged.pcap
BASE=${BASE:-}
read -r -a VARS <<< "${VARIANTS:-sluice-jit sluice-interp sluice-inlane sluice-2lanes sluice-2rtc softflowd nfpcapd${BASE:+ base-jit base-interp base-inlane base-2lanes base-2rtc}}"
if [ ! -f "$SRC" ]; then
  echo "skipped: $SRC is not there (the shared real traces)"; exit 0
fi
for t in editcap mergecap capinfos softflowd nfpcapd nfdump python3; do
  command -v "$t" > /dev/null || { echo "needs $t (apt-get install tshark softflowd nfdump python3)" >&2; exit 2; }
done
TMP=$(mktemp -d)
SINK=""
trap '[ -z "$SINK" ] || kill "$SINK" 2> /dev/null; rm -rf "$TMP"' EXIT
# The collector: a UDP socket bound on loopback, never read.
source tests/bench/udp_sink.sh
start_udp_sink
mkdir -p "$CACHE"
DISTINCT=${DISTINCT:-1}
TRACE=$CACHE/ndpi_x$COPIES$([ "$DISTINCT" = 1 ] && echo _distinct).pcap
if [ ! -f "$TRACE" ]; then
  echo "== making $TRACE ($COPIES copies of $SRC)"
  parts=()
  for ((i = 0; i < COPIES; i++)); do
    editcap -F pcap -t $((i * 50000)) "$SRC" "$TMP/part$i.pcap"
    if [ "$DISTINCT" = 1 ] && ((i > 0)); then
      python3 tests/bench/distinct_copy.py "$TMP/part$i.pcap" "$TMP/part$i.pcap" $(((i * 2654435761) & 0xffffffff))
    fi
    parts+=("$TMP/part$i.pcap")
  done
  mergecap -a -F pcap -w "$TRACE.tmp" "${parts[@]}"
  rm -f "${parts[@]}"
  mv "$TRACE.tmp" "$TRACE"
fi
pk=$(capinfos -c -M "$TRACE" | awk '/Number of packets/ {print $NF}')
# The trace as the page cache holds a file read from the disk, whoever wrote
# it and however it was read before (FROM_DISK=0: as it is): dropped from
# the cache, then read back once. How the cache holds it matters to a meter
# that maps the file (Sluice): on Linux 6.16 on, a file read from the disk
# with enough read-ahead is cached in 2 MiB folios, each mapped at once; a
# file just written, in small ones (docs/performance.md). The others read() it.
if [ "${FROM_DISK:-1}" = 1 ]; then
  python3 -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$TRACE"
  cat "$TRACE" > /dev/null
fi

cat > "$TMP/one.pipe" <<PIPE
exp :: shared IPFIXExporter(127.0.0.1:$PORT, rate 100Gbps);
RSSSource(device "pcap:$TRACE") -> Timestamp(clock pcap) -> Filter("ip or ip6")
  -> ft :: FlowTable(capacity 1M, idle 15s, active 30min) -> GCSlicer(table ft) -> exp;
PIPE
cat > "$TMP/one-inlane.pipe" <<PIPE
RSSSource(device "pcap:$TRACE") -> Timestamp(clock pcap) -> Filter("ip or ip6")
  -> ft :: FlowTable(capacity 1M, idle 15s, active 30min) -> GCSlicer(table ft) -> IPFIXExporter(127.0.0.1:$PORT, rate 100Gbps);
PIPE
cat > "$TMP/two.pipe" <<PIPE
src :: RSSSource(device "pcap:$TRACE", queues 2);
exp :: shared IPFIXExporter(127.0.0.1:$PORT, rate 100Gbps);
src -> Timestamp(clock pcap) -> Ring(capacity 64K) -> Filter("ip or ip6")
    -> ft :: FlowTable(capacity 1M, idle 15s, active 30min) -> GCSlicer(table ft) -> exp;
PIPE
cat > "$TMP/two-rtc.pipe" <<PIPE
src :: RSSSource(device "pcap:$TRACE", queues 2);
exp :: shared IPFIXExporter(127.0.0.1:$PORT, rate 100Gbps);
src -> Timestamp(clock pcap) -> Filter("ip or ip6")
    -> ft :: FlowTable(capacity 1M, idle 15s, active 30min) -> GCSlicer(table ft) -> exp;
PIPE

run_variant() {
  case $1 in
    sluice-jit) "$SLUICE" run -q --jit "$TMP/one.pipe";;
    sluice-interp) "$SLUICE" run -q --no-jit "$TMP/one.pipe";;
    sluice-inlane) "$SLUICE" run -q --no-jit "$TMP/one-inlane.pipe";;
    sluice-2lanes) "$SLUICE" run -q --jit "$TMP/two.pipe";;
    sluice-2rtc) "$SLUICE" run -q --jit "$TMP/two-rtc.pipe";;
    base-jit) "$BASE" run -q --jit "$TMP/one.pipe";;
    base-interp) "$BASE" run -q --no-jit "$TMP/one.pipe";;
    base-inlane) "$BASE" run -q --no-jit "$TMP/one-inlane.pipe";;
    base-2lanes) "$BASE" run -q --jit "$TMP/two.pipe";;
    base-2rtc) "$BASE" run -q --jit "$TMP/two-rtc.pipe";;
    softflowd) softflowd -r "$TRACE" -n 127.0.0.1:$PORT -v 9 -m 1000000 -d;;
    nfpcapd) rm -rf "$TMP/nf" && mkdir "$TMP/nf" && nfpcapd -r "$TRACE" -w "$TMP/nf";;
    *) echo "unknown variant $1" >&2; exit 2;;
  esac
}
# One run of a variant: its wall seconds, and its cpu seconds (user + system,
# every thread) into cpu[$1].
declare -A cpu
secs() {
  local TIMEFORMAT='%R %U %S' t rc=0
  t=$( { time run_variant "$1" > "$TMP/out.txt" 2>&1; } 2>&1 ) || rc=$?
  if [ "$rc" != 0 ]; then
    echo "$1 failed (exit $rc):" >&2; tail -5 "$TMP/out.txt" >&2; exit 1
  fi
  read -r wall user sys <<< "$t"
  echo "$wall $(echo "$user + $sys" | bc -l)"
}

# The flow records a meter's run exported, from its output.
records() {
  case $1 in
    sluice-* | base-*) sed -n 's/^records: made \([0-9]*\) .*/\1/p' "$TMP/out.txt";;
    softflowd) sed -n 's/^Flows exported: \([0-9]*\) .*/\1/p' "$TMP/out.txt";;
    nfpcapd) nfdump -R "$TMP/nf" -I | awk '/^Flows:/ {print $2}';;
  esac
}
declare -A flows
for v in "${VARS[@]}"; do  # warm the page cache; count the records
  secs "$v" > /dev/null
  flows[$v]=$(records "$v")
done
declare -A times
n=${#VARS[@]}
# Each round in an order of its own (the same for a given REPS): with the
# variants in one order turned round, the one after nfpcapd was always the
# same, and ran 0.02-0.05 s slower than elsewhere (the next process after a
# run of nfpcapd's size starts slower; a sync, a pause did not help).
for ((r = 0; r < REPS; r++)); do
  mapfile -t order < <(printf '%s\n' "${VARS[@]}" | shuf --random-source=<(yes "round $r"))
  for v in "${order[@]}"; do
    read -r w c <<< "$(secs "$v")"
    times[$v]+="$w "
    cpu[$v]+="$c "
    # The trace back in the page cache (nfpcapd's memory pushes some of it
    # out) and what a run wrote on the disk, before the next run.
    sync; cat "$TRACE" > /dev/null
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A med
best_peer=""
for v in "${VARS[@]}"; do
  med[$v]=$(echo "${times[$v]}" | median)
  case $v in sluice-* | base-*) ;; *) if [ -z "$best_peer" ] || (($(echo "${med[$v]} < ${med[$best_peer]}" | bc -l))); then best_peer=$v; fi;; esac
done
echo "== $pk packets ($TRACE), whole process, median of $REPS interleaved runs"
printf '  %-14s %8s %8s  %-24s %8s  %s\n' meter seconds Mpps "${best_peer:+speed-up over $best_peer}" "cpu s" "flow records"
for v in "${VARS[@]}"; do
  t=${med[$v]}
  ratio=""
  [ -n "$best_peer" ] && ratio=$(printf '%.2fx' "$(echo "${med[$best_peer]} / $t" | bc -l)")
  printf '  %-14s %8.3f %8.2f  %-24s %8.3f  %s\n' "$v" "$t" "$(echo "$pk / $t / 1000000" | bc -l)" "$ratio" \
    "$(echo "${cpu[$v]}" | median)" "${flows[$v]}"
done
echo "  (all runs, wall s / cpu s:)"
for v in "${VARS[@]}"; do printf '    %-14s %s\n    %-14s %s\n' "$v" "${times[$v]}" "" "${cpu[$v]}"; done
