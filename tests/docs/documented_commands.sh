#!/usr/bin/env bash
# Every `sluice` command shown in README.md and docs/*.md, run as written
# (the binary and sudo aside), so that the documentation cannot drift from
# the program. Root: everything runs in a network namespace made here, with
# its own loopback (nfcapd listening where the commands export) and a veth
# pair whose end is named eth0, with traffic sent over it, so the af_packet
# commands and the `sluice ctl` ones (against the probe docs/control.md
# starts) run too. Not root: the commands that need none of that run, the
# rest are reported skipped with the reason.
#   tests/docs/documented_commands.sh SLUICE AFP_SEND
set -uo pipefail
SLUICE=$(realpath "$1") AFP_SEND=$(realpath "$2")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/sluice-docs.XXXXXX)
NS=sluice-docs-$$
failed=0 ran=0 skipped=0
cleanup() {
  [ -n "${PROBE:-}" ] && kill -INT "$PROBE" 2> /dev/null && wait "$PROBE" 2> /dev/null
  [ -n "${SENDER:-}" ] && kill "$SENDER" 2> /dev/null
  ip netns pids "$NS" 2> /dev/null | xargs -r kill 2> /dev/null
  ip netns del "$NS" 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# The commands: lines of fenced blocks that run sluice, continuations joined,
# comments taken off; FILE, background (a trailing &) or foreground, COMMAND.
extract() {
  for f in "$SRC"/README.md "$SRC"/docs/*.md; do
    [ "$(basename "$f")" = elements.md ] && continue  # generated; no commands
    awk -v file="${f#"$SRC"/}" '
      /^```/ { block = !block; next }
      block && (cont != "" || $0 ~ /^(sudo )?(build\/engine\/)?sluice /) {
        line = cont $0
        if (line ~ /\\$/) { sub(/\\$/, "", line); cont = line; next }
        cont = ""
        sub(/[ \t]+#.*$/, "", line)
        bg = sub(/[ \t]*&[ \t]*$/, "", line) ? "background" : "foreground"
        print file "\t" bg "\t" line
      }' "$f"
  done
}

# A sandbox like the source tree: configs/ and examples/ as they are, the
# demo trace made here (flowprobe.pipe reads it by default).
mkdir -p "$WORK/examples/traces"
ln -s "$SRC/configs" "$WORK/configs"
for f in "$SRC"/examples/*; do [ "$(basename "$f")" = traces ] || ln -s "$f" "$WORK/examples/"; done
cd "$WORK"
"$SLUICE" run -q examples/make_trace.pipe -D OUT=examples/traces/demo.pcap > make.log 2>&1 ||
  { cat make.log; echo "cannot make the demo trace"; exit 1; }
# new.pipe of the reload examples: the default probe with another filter and timeouts
sed -e 's/Filter("ip or ip6")/Filter("ip or ip6 or vlan")/' -e 's/Meter(15s, 30min)/Meter(20s, 30min)/' \
  configs/flowprobe.pipe > new.pipe

IN_NS=""
if [ "$(id -u)" = 0 ] && ip netns add "$NS" 2> /dev/null; then
  IN_NS="ip netns exec $NS"
  $IN_NS ip link set lo up
  $IN_NS ip link add eth0 numtxqueues 2 numrxqueues 2 type veth peer name peer0 numtxqueues 2 numrxqueues 2
  $IN_NS sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  $IN_NS ip link set eth0 up && $IN_NS ip link set peer0 up
  if command -v nfcapd > /dev/null; then  # the collectors the commands name
    for port in 4739 2055; do mkdir -p "nfcapd-$port"; $IN_NS nfcapd -w "$WORK/nfcapd-$port" -p $port -b 127.0.0.1 > /dev/null 2>&1 & done
    sleep 1
  fi
  # traffic on eth0 all along: a slow, endless replay of the demo trace
  ( while :; do $IN_NS "$AFP_SEND" peer0 examples/traces/demo.pcap 2000 > /dev/null 2>&1 || break; done ) &
  SENDER=$!
  why_not=""
else
  why_not="not root: no network namespace with eth0, loopback collectors and a running probe"
fi
export XDG_RUNTIME_DIR="$WORK/run"  # `sluice ctl` finds the probe started here, and only it
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

# The command line as bash runs it: our binary for `sluice`, no sudo.
as_run() {
  local c=${1#sudo }
  c=${c/#build\/engine\/sluice /sluice }
  echo "exec \"$SLUICE\" ${c#sluice }"
}

# A probe that runs until Ctrl-C (live, no --duration): Ctrl-C once its
# lanes have taken in packets, as a user would after a look at it.
run_until_traffic() {  # COMMAND: the exit status
  local dir="$WORK/run-$ran" status=0 pid
  mkdir -p -m 700 "$dir"
  XDG_RUNTIME_DIR=$dir $IN_NS bash -c "$(as_run "$1")" > out.txt 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    sock=$(ls "$dir"/sluice/*.sock 2> /dev/null | head -1)
    [ -n "$sock" ] && "$SLUICE" ctl --socket "$sock" stats --json 2> /dev/null | grep -q '"received": [1-9]' && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.2
  done
  kill -INT "$pid" 2> /dev/null
  wait "$pid" || status=$?
  return "$status"
}

run() {  # FILE COMMAND: run it, report, count
  local file=$1 cmd=$2 status=0
  if [[ "$cmd" == *" run "* && "$cmd" == *af_packet* && "$cmd" != *--duration* ]]; then
    run_until_traffic "$cmd" || status=$?
  else
    timeout -s INT -k 10 120 $IN_NS bash -c "$(as_run "$cmd")" > out.txt 2>&1 || status=$?
  fi
  ran=$((ran + 1))
  # exit 0 from `run` says every packet and record was accounted for and
  # nothing lost; a live run must also have seen the traffic on eth0
  local why=""
  if [ "$status" != 0 ]; then why="exit $status"
  elif [[ "$cmd" == *" run "* ]] && ! grep -q "every packet accounted for" out.txt; then why="no accounting line"
  elif [[ "$cmd" == *" run "* && "$cmd" == *af_packet* ]] && ! grep -q "received [1-9][0-9]* packets" out.txt; then
    why="no packet received on eth0"
  fi
  if [ -n "$why" ]; then
    failed=$((failed + 1))
    echo "FAILED ($file, $why): $cmd"
    sed 's/^/    /' out.txt | tail -15
  else
    echo "ok ($file): $cmd"
  fi
}

# The probe `sluice ctl` commands talk to: one the docs start in the
# background, else the one of docs/control.md, started at the first ctl.
start_probe() {  # COMMAND
  stop_probe
  $IN_NS bash -c "$(as_run "$1")" > probe.log 2>&1 &
  PROBE=$!
  for _ in $(seq 300); do "$SLUICE" ctl stats > /dev/null 2>&1 && return; sleep 0.2; done
  echo "the probe for the ctl commands did not start:"; tail probe.log
}
stop_probe() {
  [ -z "${PROBE:-}" ] && return
  kill -INT "$PROBE" 2> /dev/null; wait "$PROBE" 2> /dev/null; PROBE=""
}

while IFS=$'\t' read -r file how cmd; do
  if [[ "$cmd" == *"/run/sluice/probe.sock"* ]]; then
    echo "skipped ($file): $cmd  -- needs the installed service sluice@probe (systemd)"; skipped=$((skipped + 1)); continue
  fi
  if [ -n "$why_not" ] && [[ "$cmd" == *af_packet* || "$cmd" == *" ctl "* || "$cmd" == *"sluice run"* ]]; then
    echo "skipped ($file): $cmd  -- $why_not"; skipped=$((skipped + 1)); continue
  fi
  if [ "$how" = background ]; then
    echo "started ($file): $cmd &"
    start_probe "$cmd"
    continue
  fi
  [[ "$cmd" == *" ctl "* && -z "${PROBE:-}" ]] && start_probe "sluice run configs/flowprobe.pipe -D DEVICE=af_packet:eth0"
  # a foreground run may want the port the ctl probe serves metrics on
  [[ "$cmd" == *" run "* ]] && stop_probe
  run "$file" "$cmd"
done < <(extract)
stop_probe

echo "documented commands: $ran run, $failed failed, $skipped skipped"
[ "$ran" -ge 20 ] || { echo "too few commands found in the docs ($ran)"; exit 1; }
[ "$failed" = 0 ]
