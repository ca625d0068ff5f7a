#!/usr/bin/env bash
# The default probe in memory, as a matrix, run by hand (not a test):
#
#   tests/bench/bench_matrix.sh
#
# Points: FLOWS (default "10K 100K 1M 10M") concurrent flows x SIZES
# ("64B imix") x LANES ("1 2") x SHAPES ("ring rtc"); at each point the
# fused loops (`--jit-wait`: every packet through them) and the interpreter
# (`--no-jit`), REPS runs each (default 3), interleaved. The graph is the
# default probe's (configs/flowprobe.pipe) fed by TrafficGen in memory
# instead of a port:
#
#   TrafficGen(queues LANES) -> Timestamp -> Ring(64K) -> Filter("ip or ip6")
#     -> FlowTable(2 x FLOWS / LANES slots, idle 1s, direction bi) -> GCSlicer
#     -> shared IPFIXExporter(rate 100Gbps: UDP to a bound socket on loopback,
#        never read; the default 20 Mbps pace would hold the lanes back)
#
# Shape `ring` is that graph: each lane is two threads, acquisition and
# metering, with the ring between them (DPDKStat's buffer against bursts).
# Shape `rtc` (run to completion) leaves the Ring out: each lane is one
# thread that receives and meters its packets, as nProbe Cento's and
# FastClick's do, so N lanes need N cores (the shared exporter's thread
# besides). On a 2-core machine only `rtc` gives each of 2 lanes a core.
# TrafficGen unpaced is offline input: where the plan gives a lane's two
# segments one cpu, the lane runs its Ring in its thread (docs/placement.md),
# and `ring` is then `rtc` with a Ring element passing batches on.
# Shape `notable` (not in the default SHAPES) is `rtc` without its flow
# table, GCSlicer and exporter (Filter -> Discard): what the rest of a lane
# costs. With SHAPES="rtc notable" a last table splits each lane's cpu into
# the table's share and the rest's, and gives the bounds that follow from
# it (below).
#
# TRAFFIC (default "short"): `short`, TrafficGen's flows as it makes them
# by default: flows arrive at FLOWS/1.5 per second of trace time, each
# lasts a few round trips (milliseconds) and leaves 1 s after its last
# packet or on FIN/RST, so the tables hold about FLOWS at once but the
# flows packets meet are the few thousand of the last milliseconds (they
# stay in the caches). `long`: FLOWS flows active at once for the whole
# trace (TrafficGen's `flow_span 1s`: each flow's packets spread over about
# a second, arrivals at 10 x FLOWS a second held back by `flows FLOWS`),
# so each packet meets any of them: the flow table's lines come from memory.
# About 16M packets either way (at least 2 s of trace; at 10M flows, flows
# of ~6 packets instead of ~15, else the trace would not fit in memory).
# REPEAT (default 1): TrafficGen replays the trace that many times, each
# pass later in trace time (`repeat`): a run REPEAT times as long with the
# memory of one pass, so that what a probe pays once (its flow table's
# memory brought in, the populator's cpu: on a VM memory the host took back
# costs 1.5-3 ms a MiB the first time) is spread over REPEAT times the
# packets: a steady state.
#
# Reported, medians of REPS:
#   Mpps        packets received by all lanes / the run's elapsed_s
#   Mpps/core   packets / the cpu time of every segment thread (lanes and the
#               shared exporter; `cpu_s` of --stats-json) and of the flow
#               tables' populator threads (`populate_cpu_s`): what a core does
#   ns/pkt      the same, as ns of cpu per packet
#   lane ns     ns of cpu per packet of the lanes' threads alone (no exporter,
#               no populator: on a VM the populator's cpu varies from run to
#               run with whether the host took the memory back meanwhile)
#   LLC/pkt     last-level cache load misses per packet (perf stat, the whole
#               process: trace generation included), where the machine counts them
#   jit/interp  Mpps/core of the fused loops over the interpreter's
#   2L/1L       2 lanes' Mpps over 1 lane's (the lanes' scaling)
#   vs base     with BASE=path/to/older/sluice: that binary's fused loops run
#               too, interleaved (mode "base"), and this column gives the
#               fused loops' Mpps/core over its: a change measured side by side
# The trace is generated into memory before the run (not counted); a point
# that would not fit in free memory is skipped with a message.
#
# SLUICE (default build/engine/sluice), BASE, FLOWS, SIZES, LANES, SHAPES, TRAFFIC, REPEAT, REPS.
# These machines are shared and noisy: compare figures of one run.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE=${SLUICE:-build/engine/sluice}
REPS=${REPS:-3}
read -r -a FLOW_POINTS <<< "${FLOWS:-10K 100K 1M 10M}"
read -r -a SIZE_POINTS <<< "${SIZES:-64B imix}"
read -r -a LANE_POINTS <<< "${LANES:-1 2}"
read -r -a SHAPE_POINTS <<< "${SHAPES:-ring rtc}"
read -r -a TRAFFIC_POINTS <<< "${TRAFFIC:-short}"
REPEAT=${REPEAT:-1}
BASE=${BASE:-}
MODES=(jit interp)
[ -x "$SLUICE" ] || { echo "no sluice binary at $SLUICE (set SLUICE)" >&2; exit 2; }
if [ -n "$BASE" ]; then
  [ -x "$BASE" ] || { echo "no sluice binary at BASE=$BASE" >&2; exit 2; }
  MODES+=(base)
fi
command -v python3 > /dev/null || { echo "needs python3 (the collector socket)" >&2; exit 2; }
TMP=$(mktemp -d)
SINK=""
trap '[ -z "$SINK" ] || kill "$SINK" 2> /dev/null; rm -rf "$TMP"' EXIT

# The collector: a UDP socket bound on loopback, never read.
source tests/bench/udp_sink.sh
start_udp_sink

# LLC misses: only where perf can count them (not in most VMs)
LLC=0
if command -v perf > /dev/null && perf stat -x, -e LLC-load-misses true 2>&1 | grep -q '^[0-9]'; then LLC=1; fi

num() { case $1 in *K) echo $((${1%K} * 1000));; *M) echo $((${1%M} * 1000000));; *) echo "$1";; esac; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) print ""; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
avail_mb() { awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo; }
flags() { case $1 in jit|base) echo "--jit-wait";; interp) echo "--no-jit";; esac; }
binary() { if [ "$1" = base ]; then echo "$BASE"; else echo "$SLUICE"; fi; }

RES=$TMP/results   # lines: POINT MODE METRIC VALUE
: > "$RES"
put() { echo "$1 $2 $3 $4" >> "$RES"; }
med() { awk -v p="$1" -v m="$2" -v k="$3" '$1 == p && $2 == m && $3 == k {print $4}' "$RES" | median; }
ratio() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; else echo -; fi; }
fmt() { if [ -n "$1" ]; then printf "%.${2:-2}f" "$1"; else echo -; fi; }

# pipe FLOWS SIZE LANES SHAPE TRAFFIC FILE: writes the graph, prints the MiB it needs
pipe() {
  local c rate ppf shape dur cap sizes limit=1G ring=" -> Ring(capacity 64K)"
  [ "$4" = rtc ] && ring=""
  c=$(num "$1")
  rate=$((c * 2 / 3)); ppf=15; shape=""
  if [ "$c" -ge 10000000 ]; then ppf=6; shape=", flow_size_max 1"; fi
  dur=$((16000000 / (rate * ppf)))
  if [ "$5" = long ]; then
    # c flows at once, each about 1.2 s: c * ppf / 1.2 packets a second
    limit=$c; rate=$((c * 10 > 100000000 ? 100000000 : c * 10)); shape="$shape, flow_span 1s"
    dur=$((16000000 * 12 / (c * ppf * 10)))
  fi
  [ "$dur" -ge 2 ] || dur=2
  [ "$REPEAT" = 1 ] || shape="$shape, repeat $REPEAT"
  cap=$((c * 2 / $3))
  sizes="sizes [64B]"; [ "$2" = imix ] && sizes="sizes imix"
  echo "src :: TrafficGen(flows $limit, new_flows_per_s $rate, $sizes, duration ${dur}s, seed 1, queues $3$shape);" > "$6"
  if [ "$4" = notable ]; then
    cap=0
    echo 'src -> Timestamp(clock pcap) -> Filter("ip or ip6") -> Discard;' >> "$6"
  else
    cat >> "$6" <<PIPE
exp :: shared IPFIXExporter(127.0.0.1:$PORT, rate 100Gbps);
src -> Timestamp(clock pcap)$ring -> Filter("ip or ip6")
    -> ft :: FlowTable(capacity $cap, idle 1s, active 30min, direction bi)
    -> GCSlicer(table ft, period 1s, slices 1000) -> exp;
PIPE
  fi
  # trace: 16 B of index + the frame (64 B; IMIX about 360 B on average) per
  # packet; 128 B of ground truth per flow; 212 B per table slot (fields all, the default)
  local frame=64 flows=$((rate * dur)); [ "$2" = imix ] && frame=360
  [ "$5" = long ] && flows=$((c * dur * 10 / 12))
  echo $(( (flows * (ppf * (16 + frame) + 128) + cap * $3 * 212) / 1048576 ))
}

# run_once POINT MODE PIPE
run_once() {
  local point=$1 mode=$2 p=$3 pre=()
  [ "$LLC" = 0 ] || pre=(perf stat -x, -o "$TMP/perf.txt" -e LLC-load-misses)
  # shellcheck disable=SC2046
  if ! "${pre[@]}" "$(binary "$mode")" run -q $(flags "$mode") "$p" --stats-json "$TMP/s.json" > "$TMP/out.txt" 2> "$TMP/err.txt"; then
    echo "  $point $mode: sluice run failed:" >&2; tail -n 5 "$TMP/err.txt" >&2; exit 1
  fi
  python3 - "$TMP/s.json" "$mode" > "$TMP/m.txt" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rx = sum(l["received"] for l in s["lanes"])
# The flow tables' populator threads too (their memory brought in beside
# the lanes: work done for them on other threads); 0 from binaries before it.
cpu = sum(g["cpu_s"] for g in s["segments"]) + s.get("populate_cpu_s", 0)
want = "interpreter" if sys.argv[2] == "interp" else "jit"
ran = {g["program"] for g in s["segments"]}
if ran != {want}:
    print(f"warning ran {sorted(ran)}, expected {want}", file=sys.stderr)
print("packets", rx)
print("mpps", rx / s["elapsed_s"] / 1e6)
print("mpps_core", rx / cpu / 1e6)
print("ns", cpu * 1e9 / rx)
# The lanes' threads alone: without the populator, whose cpu on a VM varies
# with whether the host took the memory back since the last run
lanes = sum(g["cpu_s"] for g in s["segments"] if g.get("lane", -1) >= 0)
print("lane_ns", lanes * 1e9 / rx)
# The shared segments' threads (the exporter)
print("shared_ns", (sum(g["cpu_s"] for g in s["segments"]) - lanes) * 1e9 / rx)
PY
  while read -r k v; do put "$point" "$mode" "$k" "$v"; done < "$TMP/m.txt"
  if [ "$LLC" = 1 ]; then
    local misses pk
    misses=$(awk -F, '/LLC-load-misses/ {print $1}' "$TMP/perf.txt")
    pk=$(awk '$1 == "packets" {print $2}' "$TMP/m.txt")
    put "$point" "$mode" llc "$(awk -v m="$misses" -v p="$pk" 'BEGIN {print m / p}')"
  fi
}

MODEL=$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}')
echo "machine: ${MODEL:-?}, nproc $(nproc), $(avail_mb) MiB available; $SLUICE${BASE:+ (base: $BASE)}; median of $REPS; each trace replayed $REPEAT time(s)"
[ "$LLC" = 1 ] || echo "LLC misses: perf stat cannot count them on this machine (LLC-load-misses <not supported>)"
for f in "${FLOW_POINTS[@]}"; do
  for z in "${SIZE_POINTS[@]}"; do
    for sh in "${SHAPE_POINTS[@]}"; do
      for t in "${TRAFFIC_POINTS[@]}"; do
      for l in "${LANE_POINTS[@]}"; do
        point="$f/$z/${l}L/$sh/$t"
        need=$(pipe "$f" "$z" "$l" "$sh" "$t" "$TMP/p.pipe")
        if [ "$need" -gt $(($(avail_mb) * 3 / 4)) ]; then
          echo "  $point skipped: needs about $need MiB, $(avail_mb) MiB available"; continue
        fi
        for ((r = 1; r <= REPS; r++)); do
          if ((r % 2)); then order=("${MODES[@]}"); else order=($(printf '%s\n' "${MODES[@]}" | tac)); fi
          for m in "${order[@]}"; do run_once "$point" "$m" "$TMP/p.pipe"; done
        done
        printf '  %-20s jit %s Mpps, interp %s Mpps%s\n' "$point" "$(fmt "$(med "$point" jit mpps)")" \
          "$(fmt "$(med "$point" interp mpps)")" "${BASE:+, base $(fmt "$(med "$point" base mpps)") Mpps}"
      done
      done
    done
  done
done
echo
echo "== the default probe in memory: median of $REPS; ${MODEL:-?}, nproc $(nproc)"
printf '  %-7s %-5s %-5s %-7s %-5s %-7s %7s %10s %7s %8s %8s %11s %6s %8s\n' flows size shape traffic lanes mode Mpps Mpps/core ns/pkt "lane ns" LLC/pkt jit/interp 2L/1L "vs base"
for f in "${FLOW_POINTS[@]}"; do
  for z in "${SIZE_POINTS[@]}"; do
    for sh in "${SHAPE_POINTS[@]}"; do
      for t in "${TRAFFIC_POINTS[@]}"; do
      for l in "${LANE_POINTS[@]}"; do
        point="$f/$z/${l}L/$sh/$t"
        grep -q "^$point " "$RES" || continue
        for m in "${MODES[@]}"; do
          jr=""; [ "$m" = jit ] && jr=$(ratio "$(med "$point" jit mpps_core)" "$(med "$point" interp mpps_core)")
          vb=""; [ "$m" = jit ] && [ -n "$BASE" ] && vb=$(ratio "$(med "$point" jit mpps_core)" "$(med "$point" base mpps_core)")
          sc=""; [ "$l" != 1 ] && sc=$(ratio "$(med "$point" "$m" mpps)" "$(med "$f/$z/1L/$sh/$t" "$m" mpps)")
          llc=$(med "$point" "$m" llc); [ -n "$llc" ] && llc=$(fmt "$llc" 2) || llc=n/a
          printf '  %-7s %-5s %-5s %-7s %-5s %-7s %7s %10s %7s %8s %8s %11s %6s %8s\n' "$f" "$z" "$sh" "$t" "$l" "$m" \
            "$(fmt "$(med "$point" "$m" mpps)")" "$(fmt "$(med "$point" "$m" mpps_core)")" \
            "$(fmt "$(med "$point" "$m" ns)" 0)" "$(fmt "$(med "$point" "$m" lane_ns)" 0)" "$llc" "${jr:--}" "${sc:--}" "${vb:--}"
        done
      done
      done
    done
  done
done

# Where a lane's time goes, for the points measured in both shapes rtc and
# notable (the same graph without its flow table: TrafficGen -> Timestamp
# -> Filter -> Discard): the table's share of the lane (FlowTable, GCSlicer
# and the records handed to the exporter: lane ns of rtc minus notable's)
# and what it leaves the other parts. Three bounds follow from it: the JIT's
# gain over the interpreter were the fused loop to do everything but the
# table in no time (the table's code is the same C++ in both and waits for
# the same memory), and the Mpps per core were the lane to spend nothing but
# the table's time and the exporter its own; and, on a one-lane row, the
# most two lanes on two cpus can give over one lane: one lane has the
# exporter on the other cpu beside it, two lanes share both cpus with it,
# 2 x lane / (lane + exporter) however well they share.
decomposition=0
for f in "${FLOW_POINTS[@]}"; do
  for z in "${SIZE_POINTS[@]}"; do
    for t in "${TRAFFIC_POINTS[@]}"; do
      for l in "${LANE_POINTS[@]}"; do
        full="$f/$z/${l}L/rtc/$t" bare="$f/$z/${l}L/notable/$t"
        grep -q "^$full " "$RES" && grep -q "^$bare " "$RES" || continue
        if [ "$decomposition" = 0 ]; then
          decomposition=1
          echo
          echo "== a lane with and without its flow table (rtc, notable), ns of cpu per packet, medians"
          printf '  %-7s %-5s %-7s %-5s %15s %17s %15s %9s %17s %16s %12s\n' flows size traffic lanes "lane jit/int" \
            "no table jit/int" "table jit/int" exporter "jit/interp bound" "Mpps/core bound" "2L/1L bound"
        fi
        lj=$(med "$full" jit lane_ns) li=$(med "$full" interp lane_ns)
        bj=$(med "$bare" jit lane_ns) bi=$(med "$bare" interp lane_ns)
        tj=$(awk -v a="$lj" -v b="$bj" 'BEGIN {print a - b}') ti=$(awk -v a="$li" -v b="$bi" 'BEGIN {print a - b}')
        ex=$(med "$full" jit shared_ns)
        sb=-; [ "$l" = 1 ] && sb=$(awk -v a="$lj" -v b="$ex" 'BEGIN {printf "%.2f", 2 * a / (a + b)}')
        printf '  %-7s %-5s %-7s %-5s %15s %17s %15s %9s %17s %16s %12s\n' "$f" "$z" "$t" "$l" \
          "$(fmt "$lj" 1)/$(fmt "$li" 1)" "$(fmt "$bj" 1)/$(fmt "$bi" 1) ($(ratio "$bi" "$bj"))" \
          "$(fmt "$tj" 1)/$(fmt "$ti" 1)" "$(fmt "$ex" 1)" "$(ratio "$li" "$tj")" \
          "$(awk -v a="$tj" -v b="$ex" 'BEGIN {if (a + b > 0) printf "%.1f", 1000 / (a + b); else print "-"}')" "$sb"
      done
    done
  done
done
