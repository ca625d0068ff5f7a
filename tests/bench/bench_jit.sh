#!/usr/bin/env bash
# What the JIT (`sluice run --jit`, the default) gains over the interpreter
# (`--no-jit`), run by hand (not a test):
#
#   tests/bench/bench_jit.sh [PARTS...]     (default: probe probe2 cheap)
#
# Parts (also PARTS="probe cheap" in the environment):
#   probe   the default probe's metering chain (configs/flowprobe.pipe), 1 lane,
#           fed by TrafficGen in memory (64-byte frames) at FLOWS concurrent flows:
#             TrafficGen -> Timestamp -> Ring -> Filter("ip or ip6")
#               -> FlowTable(capacity 2 x FLOWS) -> GCSlicer -> FlowLog("/dev/null")
#           The table reaches about FLOWS flows as in bench_probe.sh: flows arrive
#           at FLOWS/1.5 per second of trace time and leave 1 s after their last
#           packet (idle 1s) or on FIN/RST; about 16M packets (at least 2 s of trace).
#   probe2  the same over 2 lanes (TrafficGen queues 2, FLOWS in all, a table of
#           FLOWS slots per lane). With fewer than 4 cpus the two segments of a
#           lane share a cpu (the plan oversubscribes): a per-lane figure then
#           includes that sharing.
#   cheap   TrafficGen -> Filter("tcp and port 443") -> Counter -> Discard,
#           reject -> Discard: one segment, where fusion should show most
#           (CHEAP_MPKTS million packets, default 20).
# Every part runs the variants side by side, interleaved (rep 1: a b c, rep 2:
# b c a, ...): `--jit-wait --jit-cpu x86-64-v3` (jit-v3), `--no-jit` (interp) and
# `--jit-wait --jit-cpu host` (jit-host); VARIANTS="jit-v3 interp" leaves one out.
# (--jit-wait: every packet through the fused loop; plain --jit starts on the
# interpreter while the loop compiles.)
# Figures are the median of REPS runs (default 3).
# BASE=path/to/an/older/sluice adds the variants base-v3 (`--jit --jit-cpu
# x86-64-v3`) and base-interp (`--no-jit`) run with that binary, interleaved
# with the others, and the ratios new/base: a change's cost measured side by
# side, e.g. BASE=/tmp/old/build/engine/sluice PARTS="probe cheap".
#
# Mpps per lane = the lane's "received" / "elapsed_s" of --stats-json (the
# same figure as the "(X Mpps)" of the text summary). elapsed_s is the run
# itself, from the segments' start to the end of the last one: trace
# generation, EAL set-up and JIT compilation come before it and are not
# counted; the end-of-input flush (every flow still in the table written as a
# record) is. At 1M flows the trace lasts 2 s, so nearly every flow is still in
# the table at the end and nearly every record is written by that flush. For
# the probe, "steady" is the median of the per-second lane rates of the status
# lines while packets flowed (the last, partial second left out): the metering
# path alone, without that flush.
# "cpu time during these runs" tells how noisy the part was: the share of the
# machine's cpu time that other processes used, and that the hypervisor took.
# Compile times are each segment's "compile_ms" of --stats-json.
#
# SLUICE (default build/engine/sluice), REPS, FLOWS (default 1M), CHEAP_MPKTS,
# VARIANTS, PARTS. A point that would not fit in this machine's free memory
# (the trace is generated into memory first) is skipped with a message.
# These machines are shared and noisy: compare figures of one run with each
# other, not across runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE=${SLUICE:-build/engine/sluice}
REPS=${REPS:-3}
FLOWS=${FLOWS:-1M}
CHEAP_MPKTS=${CHEAP_MPKTS:-20}
BASE=${BASE:-}
read -r -a VARS <<< "${VARIANTS:-jit-v3 interp jit-host${BASE:+ base-v3 base-interp}}"
PARTS_LIST=("$@")
[ ${#PARTS_LIST[@]} -gt 0 ] || read -r -a PARTS_LIST <<< "${PARTS:-probe probe2 cheap}"
for p in "${PARTS_LIST[@]}"; do
  case $p in probe|probe2|cheap) ;; *) echo "unknown part '$p' (probe, probe2, cheap)" >&2; exit 2;; esac
done
for v in "${VARS[@]}"; do
  case $v in
    jit-v3|interp|jit-host) ;;
    base-v3|base-interp) [ -x "$BASE" ] || { echo "variant '$v' needs BASE, an older sluice binary" >&2; exit 2; };;
    *) echo "unknown variant '$v' (jit-v3, interp, jit-host, base-v3, base-interp)" >&2; exit 2;;
  esac
done
[ -x "$SLUICE" ] || { echo "no sluice binary at $SLUICE (set SLUICE)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
START=$(date +%s)

# x86-64-v3 code needs these; without them that variant is left out
if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw bmi2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
  echo "note: this cpu lacks x86-64-v3 (avx2, bmi2, fma): variants jit-v3 and base-v3 left out"
  v=(); for x in "${VARS[@]}"; do [ "$x" = jit-v3 ] || [ "$x" = base-v3 ] || v+=("$x"); done; VARS=("${v[@]}")
fi

num() { case $1 in *K) echo $((${1%K} * 1024));; *M) echo $((${1%M} * 1048576));; *) echo "$1";; esac; }
field() { grep -o "\"$2\": [0-9.e-]*" "$1" | head -1 | awk '{print $2}'; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) print ""; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
flags() {
  # --jit-wait: the fused loop from the first packet (--jit starts on the
  # interpreter); a BASE binary from before --jit-wait always waited
  case $1 in jit-v3) echo "--jit-wait --jit-cpu x86-64-v3";; base-v3) echo "--jit --jit-cpu x86-64-v3";;
    interp|base-interp) echo "--no-jit";; jit-host) echo "--jit-wait --jit-cpu host";; esac
}
binary() { case $1 in base-*) echo "$BASE";; *) echo "$SLUICE";; esac; }
avail_mb() { awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo; }
# the variants in rep r's order: rotated by r-1
order() { local r=$1 n=${#VARS[@]} i; for ((i = 0; i < n; i++)); do echo "${VARS[$(((i + r - 1) % n))]}"; done; }

RES=$TMP/results   # lines: KEY VARIANT VALUE
: > "$RES"
put() { echo "$1 $2 $3" >> "$RES"; }
med() { awk -v k="$1" -v v="$2" '$1 == k && $2 == v {print $3}' "$RES" | median; }
ratio() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; else echo -; fi; }
fmt() { if [ -n "$1" ]; then printf "%.${2:-2}f" "$1"; else echo -; fi; }

# Per-second rates of lane $2 (Mpps) from the status lines in $1, while it
# received packets, without its last, partial second.
steady_samples() {
  { grep -o "lane $2: [0-9.]* [KMG]*pps" "$1" || true; } | awk '{
      v = $3; u = $4
      if (u == "Kpps") v /= 1000; else if (u == "pps") v /= 1000000; else if (u == "Gpps") v *= 1000
      print v }' | awk '$1 > 0 {a[++n] = $1} END {for (i = 1; i < n; i++) print a[i]}'
}

# The cpu line of /proc/stat: total, busy (not idle, iowait or steal) and
# steal ticks; then the cpu seconds this script's children used (`times`).
cpu_ticks() { awk '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print t, t - $5 - $6 - $9, $9}' /proc/stat; }
# (`times` in this shell, not in a subshell, which would count its own children)
children_cpu() { tail -n 1 "$TMP/times" | tr 'ms' '  ' | awk '{print $1 * 60 + $2 + $3 * 60 + $4}'; }

# run_point PART PIPE LANES: every variant REPS times, interleaved.
run_point() {
  local part=$1 pipe=$2 lanes=$3 r v l s t0 c0
  times > "$TMP/times"; t0=$(cpu_ticks); c0=$(children_cpu)
  for ((r = 1; r <= REPS; r++)); do
    for v in $(order "$r"); do
      # shellcheck disable=SC2046
      if ! "$(binary "$v")" run $(flags "$v") "$pipe" --stats-json "$TMP/s.json" > "$TMP/out.txt" 2> "$TMP/err.txt"; then
        echo "  $part $v: sluice run failed:" >&2; tail -n 5 "$TMP/err.txt" >&2; exit 1
      fi
      local el want got
      el=$(field "$TMP/s.json" elapsed_s)
      want=jit; case $v in *interp) want=interpreter;; esac
      got=$(grep -o '"program": "[a-z]*"' "$TMP/s.json" | sort -u | awk -F'"' '{print $4}' | tr '\n' ' ')
      [ "$got" = "$want " ] || echo "  warning: $part $v ran programs: $got(expected $want)"
      for ((l = 0; l < lanes; l++)); do
        local rx
        rx=$(grep -o "\"lane\": $l, \"received\": [0-9]*" "$TMP/s.json" | awk '{print $4}')
        put "$part.mpps.$l" "$v" "$(awk -v n="$rx" -v t="$el" 'BEGIN {print n / t / 1e6}')"
        if [ "$part" != cheap ]; then  # the cheap chain's runs are too short for per-second rates
          s=$(steady_samples "$TMP/err.txt" "$l" | median)
          [ -z "$s" ] || put "$part.steady.$l" "$v" "$s"
        fi
      done
      put "$part.elapsed" "$v" "$el"
      # each segment: id, lane, role, compile_ms (-1: not compiled)
      grep '"segment":' "$TMP/s.json" |
        sed -E 's/.*"segment": ([0-9]+), "lane": (-?[0-9]+), "role": "([a-z]+)".*"compile_ms": ([0-9.e-]+).*/\1 \2 \3 \4/' \
        > "$TMP/segs.txt"
      while read -r seg _ _ ms; do [ "$ms" = -1 ] || put "$part.cms.$seg" "$v" "$ms"; done < "$TMP/segs.txt"
      if [ "$r" -eq 1 ] && [ "$v" = "${VARS[0]}" ]; then
        awk '{print $1, ($2 < 0 ? "shared" : "l" $2) "-" substr($3, 1, 4)}' "$TMP/segs.txt" > "$TMP/$part.roles"
        cp "$TMP/out.txt" "$TMP/$part.summary"
      fi
      printf '    rep %d %-8s %6.2f s run, %s Mpps (lane 0)\n' "$r" "$v" "$el" \
        "$(awk -v k="$part.mpps.0" -v v="$v" '$1 == k && $2 == v {x = $3} END {printf "%.2f", x}' "$RES")"
    done
  done
  # Signs of noise while the part ran, as shares of the machine's cpu time:
  # what other processes used (busy time not this script's), and what the
  # hypervisor took (steal).
  local t1 c1
  times > "$TMP/times"; t1=$(cpu_ticks); c1=$(children_cpu)
  NOISE[$part]=$(awk -v a="$t0" -v b="$t1" -v c0="$c0" -v c1="$c1" -v hz="$(getconf CLK_TCK)" 'BEGIN {
      split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
      others = (y[2] - x[2]) / hz - (c1 - c0); if (others < 0) others = 0
      if (t > 0) printf "other processes %.0f%%, steal %.0f%%", 100 * others * hz / t, 100 * (y[3] - x[3]) / t }')
  echo "  cpu time during these runs: ${NOISE[$part]}"
}
range() { awk -v k="$1" -v v="$2" '$1 == k && $2 == v {x = $3 + 0; if (n++ == 0 || x < lo) lo = x; if (x > hi) hi = x}
  END {if (n) printf "%.2f-%.2f", lo, hi; else print "-"}' "$RES"; }

# report_point PART LANES TITLE
report_point() {
  local part=$1 lanes=$2 l v seg role
  echo "  Mpps per lane (received / elapsed_s of --stats-json), median of $REPS [lowest-highest]:"
  printf '    %-9s' lane; for v in "${VARS[@]}"; do printf ' %21s' "$v"; done; printf ' %11s %8s\n' "jit/interp" "host/v3"
  for ((l = 0; l < lanes; l++)); do
    for kind in mpps steady; do
      [ "$kind" = steady ] && ! grep -q "^$part.steady.$l " "$RES" && continue
      printf '    %-9s' "$l$([ $kind = steady ] && echo ' steady')"
      for v in "${VARS[@]}"; do printf ' %21s' "$(fmt "$(med "$part.$kind.$l" "$v")") [$(range "$part.$kind.$l" "$v")]"; done
      printf ' %11s %8s\n' "$(ratio "$(med "$part.$kind.$l" jit-v3)" "$(med "$part.$kind.$l" interp)")" \
        "$(ratio "$(med "$part.$kind.$l" jit-host)" "$(med "$part.$kind.$l" jit-v3)")"
    done
  done
  [ -z "$BASE" ] || for ((l = 0; l < lanes; l++)); do
    printf '    lane %d against BASE: jit-v3/base-v3 %s, interp/base-interp %s\n' "$l" \
      "$(ratio "$(med "$part.mpps.$l" jit-v3)" "$(med "$part.mpps.$l" base-v3)")" \
      "$(ratio "$(med "$part.mpps.$l" interp)" "$(med "$part.mpps.$l" base-interp)")"
  done
  echo "  JIT compile time per segment (compile_ms), median of $REPS:"
  while read -r seg role; do
    printf '    segment %d (%s):' "$seg" "$role"
    for v in jit-v3 jit-host; do
      local m; m=$(med "$part.cms.$seg" "$v")
      [ -z "$m" ] || printf ' %s %.0f ms' "$v" "$m"
    done
    echo
  done < "$TMP/$part.roles"
  local rx held
  rx=$(grep -o '^lane [0-9]*: received [0-9]*' "$TMP/$part.summary" | awk '{s += $4} END {print s}')
  held=$({ grep -o 'at most [0-9]* at once' "$TMP/$part.summary" || true; } | awk '{printf "%s%s", (NR > 1 ? " " : ""), $3}')
  echo "  $rx packets in all${held:+; flows held at most (per lane): $held}"
}

# memory check: prints a skip message and fails when NEED_MB does not fit
fits() {
  local a; a=$(avail_mb)
  if [ "$2" -gt $((a * 3 / 4)) ]; then
    printf '  %s skipped: needs about %d MiB, %d MiB available\n' "$1" "$2" "$a"
    return 1
  fi
}

probe_pipe() {  # LANES FILE
  local lanes=$1 c rate dur cap
  c=$(num "$FLOWS")
  rate=$((c * 2 / 3)); dur=$((16000000 / (rate * 15))); [ "$dur" -ge 2 ] || dur=2
  cap=$((c * 2 / lanes))
  cat > "$2" <<PIPE
src :: TrafficGen(flows 1G, new_flows_per_s $rate, sizes [64B], duration ${dur}s, seed 1, queues $lanes);
src -> Timestamp(clock pcap) -> Ring(capacity 64K) -> Filter("ip or ip6")
    -> ft :: FlowTable(capacity $cap, idle 1s, active 30min, direction bi)
    -> GCSlicer(table ft, period 1s, slices 1000) -> FlowLog("/dev/null");
PIPE
  # trace: 16 B of index + 64 B per packet (~15 a flow); 128 B ground truth per flow; 212 B per table slot (fields all, the default)
  echo $(( (rate * dur * (15 * 80 + 128) + cap * lanes * 212) / 1048576 ))
}

MODEL=$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}')
echo "machine: ${MODEL:-?}, nproc $(nproc), $(avail_mb) MiB available; $SLUICE; variants: ${VARS[*]}; median of $REPS"
declare -A DONE NOISE
for part in "${PARTS_LIST[@]}"; do
  case $part in
    probe|probe2)
      lanes=1; [ "$part" = probe2 ] && lanes=2
      echo "== default probe, $lanes lane$([ "$lanes" -eq 1 ] || echo s), $FLOWS concurrent flows, TrafficGen in memory"
      need=$(probe_pipe "$lanes" "$TMP/$part.pipe")
      fits "$FLOWS flows, $lanes lane$([ "$lanes" -eq 1 ] || echo s)" "$need" || continue
      [ "$lanes" -eq 1 ] || [ "$(nproc)" -ge 4 ] || echo "  note: $(nproc) cpus for 4 segments: each lane's two segments share a cpu"
      run_point "$part" "$TMP/$part.pipe" "$lanes"
      report_point "$part" "$lanes"
      DONE[$part]=1;;
    cheap)
      echo "== cheap chain: TrafficGen -> Filter(\"tcp and port 443\") -> Counter -> Discard, 1 lane"
      fps=$((CHEAP_MPKTS * 1000000 / 150))   # ~15 packets a flow over 10 s of trace
      cat > "$TMP/cheap.pipe" <<PIPE
gen :: TrafficGen(flows 100K, new_flows_per_s $fps, sizes [64B], duration 10s, seed 1);
gen -> f :: Filter("tcp and port 443") -> Counter -> Discard;
f[reject] -> Discard;
PIPE
      fits "cheap chain, ${CHEAP_MPKTS}M packets" $((CHEAP_MPKTS * 80 + fps * 10 * 128 / 1048576)) || continue
      run_point cheap "$TMP/cheap.pipe" 1
      report_point cheap 1
      DONE[$part]=1;;
  esac
done

echo
echo "== summary: ${MODEL:-?}, nproc $(nproc); median of $REPS; Mpps per lane = received / elapsed_s (--stats-json)"
printf '  %-22s %-5s %8s %8s %8s %10s %8s  %s\n' configuration lane interp jit-v3 jit-host jit/interp host/v3 "compile ms per segment (jit-v3 / jit-host)"
for part in probe probe2 cheap; do
  [ -n "${DONE[$part]:-}" ] || continue
  case $part in probe) name="probe $FLOWS, 1 lane"; lanes=1;; probe2) name="probe $FLOWS, 2 lanes"; lanes=2;;
    cheap) name="cheap chain"; lanes=1;; esac
  comp=$(while read -r seg role; do
           printf '%s %s/%s  ' "$role" "$(fmt "$(med "$part.cms.$seg" jit-v3)" 0)" "$(fmt "$(med "$part.cms.$seg" jit-host)" 0)"
         done < "$TMP/$part.roles" | sed 's/ *$//')
  for ((l = 0; l < lanes; l++)); do
    for kind in mpps steady; do
      grep -q "^$part.$kind.$l " "$RES" || continue
      label=$name; [ "$kind" = steady ] && label="  (steady)"
      printf '  %-22s %-5s %8s %8s %8s %10s %8s  %s\n' "$label" "$l" \
        "$(fmt "$(med "$part.$kind.$l" interp)")" "$(fmt "$(med "$part.$kind.$l" jit-v3)")" "$(fmt "$(med "$part.$kind.$l" jit-host)")" \
        "$(ratio "$(med "$part.$kind.$l" jit-v3)" "$(med "$part.$kind.$l" interp)")" \
        "$(ratio "$(med "$part.$kind.$l" jit-host)" "$(med "$part.$kind.$l" jit-v3)")" \
        "$([ "$l" -eq 0 ] && [ "$kind" = mpps ] && echo "$comp")"
    done
  done
done
! grep -q '\.steady\.' "$RES" ||
  echo "  (steady: median per-second status-line rate while packets flowed, end-of-input flush excluded)"
for part in probe probe2 cheap; do
  [ -z "${NOISE[$part]:-}" ] || echo "  cpu time of the machine during $part: ${NOISE[$part]}"
done
if [ -n "$BASE" ]; then
  echo "  against BASE ($BASE), Mpps per lane, new/base (median of $REPS each, interleaved):"
  for part in probe probe2 cheap; do
    [ -n "${DONE[$part]:-}" ] || continue
    printf '    %-8s jit-v3/base-v3 %s, interp/base-interp %s (lane 0)\n' "$part" \
      "$(ratio "$(med "$part.mpps.0" jit-v3)" "$(med "$part.mpps.0" base-v3)")" \
      "$(ratio "$(med "$part.mpps.0" interp)" "$(med "$part.mpps.0" base-interp)")"
  done
fi
echo "  total time: $(( $(date +%s) - START )) s"
