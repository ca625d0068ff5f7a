#!/usr/bin/env bash
# The Debian package as a user gets it: built with CPack, its dependencies
# resolvable from Debian 12's archive (apt-get --simulate), unpacked into a
# fresh root, and the installed sluice run there on a trace with the
# installed configuration, nothing from the build tree: every packet and
# flow record accounted for, and nfcapd (when installed) collects every
# record. Also checks the man page and the systemd unit it ships.
#   tests/package/check_package.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "check_package: FAILED: $*" >&2; exit 1; }

echo "== the Debian package: cpack"
cmake -DCMAKE_INSTALL_PREFIX=/usr "$BUILD" > /dev/null
cmake --build "$BUILD" --target sluice sluice_jit sluice_man_page > /dev/null
rm -f "$BUILD"/sluice_*.deb
(cd "$BUILD" && cpack -G DEB > /dev/null 2>&1) || (cd "$BUILD" && cpack -G DEB)
DEB=$(ls "$BUILD"/sluice_*_amd64.deb)
echo "   $DEB"

DEPENDS=$(dpkg-deb -f "$DEB" Depends)
STATIC_DPDK=$(grep -q '^SLUICE_STATIC_DPDK:BOOL=ON' "$BUILD/CMakeCache.txt" && echo 1 || echo 0)
if [ "$STATIC_DPDK" = 1 ]; then
  # DPDK linked in (its drivers too): no DPDK package; what its drivers link
  # (NUMA, af_xdp's libxdp, mlx5's rdma-core) found by dpkg-shlibdeps.
  [[ "$DEPENDS" != *librte-* ]] || fail "DPDK is linked in, yet Depends names DPDK's packages: $DEPENDS"
  for lib in libllvm19 libnuma1 libxdp1 libibverbs1; do
    [[ "$DEPENDS" == *"$lib"* ]] || fail "Depends lacks $lib: $DEPENDS"
  done
else
  # DPDK's drivers are loaded at run time: dpkg-shlibdeps cannot see them.
  for pmd in librte-net-af-packet23 librte-mempool-ring23 librte-mempool-stack23 librte-bus-vdev23 librte-eal23 libllvm19; do
    [[ "$DEPENDS" == *"$pmd"* ]] || fail "Depends lacks $pmd: $DEPENDS"
  done
fi
# Every dependency exists in the archive, in a version that satisfies it
# (the package lists first, where a machine has none).
if [ -z "$(ls /var/lib/apt/lists/ 2> /dev/null | grep -v -e lock -e partial)" ]; then
  if [ "$(id -u)" = 0 ]; then apt-get update -q > /dev/null; else sudo apt-get update -q > /dev/null; fi
fi
if apt-get install --simulate -q "$DEB" > "$BUILD/apt-simulate.txt" 2>&1; then
  echo "   apt-get would install it with its dependencies"
else
  cat "$BUILD/apt-simulate.txt" >&2
  fail "apt-get cannot satisfy the package's dependencies"
fi
[ "$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | grep -c '^/etc/sluice/')" -ge 2 ] ||
  fail "the configurations in /etc/sluice are not conffiles"

ROOT=$(mktemp -d /tmp/sluice-root.XXXXXX)
WORK=$(mktemp -d /tmp/sluice-package-run.XXXXXX)
trap 'rm -rf "$ROOT" "$WORK"; [ -n "${NFCAPD:-}" ] && kill "$NFCAPD" 2>/dev/null || true' EXIT
dpkg-deb -x "$DEB" "$ROOT"
for f in usr/bin/sluice etc/sluice/flowprobe.pipe etc/sluice/laptop.yaml usr/lib/systemd/system/sluice@.service \
         usr/share/man/man1/sluice.1.gz usr/share/doc/sluice/README.md; do
  [ -e "$ROOT/$f" ] || fail "/$f is not in the package"
done
! ldd "$ROOT/usr/bin/sluice" | grep -q "not found" || fail "the installed sluice misses libraries: $(ldd "$ROOT/usr/bin/sluice" | grep 'not found')"
# The JIT is a module the executable opens when a run needs it, LLVM with it
# (engine/jit/jit_module.hh): the executable itself does not load LLVM.
JIT_MODULE=$(cd "$ROOT" && find usr/lib -name sluice-jit.so)
[ -n "$JIT_MODULE" ] || fail "the JIT module sluice-jit.so is not in the package"
! ldd "$ROOT/$JIT_MODULE" | grep -q "not found" || fail "the JIT module misses libraries: $(ldd "$ROOT/$JIT_MODULE" | grep 'not found')"
ldd "$ROOT/$JIT_MODULE" | grep -q libLLVM || fail "the JIT module does not load LLVM"
! ldd "$ROOT/usr/bin/sluice" | grep -q libLLVM || fail "the installed sluice loads LLVM itself, not through its JIT module"
[ "$STATIC_DPDK" = 0 ] || ! ldd "$ROOT/usr/bin/sluice" | grep -q librte_ ||
  fail "DPDK is linked in, yet the installed sluice loads DPDK's shared libraries: $(ldd "$ROOT/usr/bin/sluice" | grep librte_)"
zcat "$ROOT/usr/share/man/man1/sluice.1.gz" | grep -q '^.SH "COMMAND RUN"' || fail "the man page has no section for sluice run"
zcat "$ROOT/usr/share/man/man1/sluice.1.gz" | grep -q -- '--stats-json' || fail "the man page lacks run's options"
grep -q '^Type=notify' "$ROOT/usr/lib/systemd/system/sluice@.service" || fail "the unit is not Type=notify"
if command -v systemd-analyze > /dev/null; then
  # The unit as shipped, its binary pointed at the unpacked one; any
  # warning (an unknown key, a command that is not there) fails.
  mkdir -p "$WORK/unit"
  sed "s|/usr/bin/sluice|$ROOT/usr/bin/sluice|g" "$ROOT/usr/lib/systemd/system/sluice@.service" > "$WORK/unit/sluice@.service"
  systemd-analyze verify --man=no "$WORK/unit/sluice@probe.service" > "$WORK/verify.txt" 2>&1 || true
  if [ -s "$WORK/verify.txt" ]; then
    cat "$WORK/verify.txt" >&2
    fail "systemd-analyze verify reports problems in sluice@.service"
  fi
  echo "   systemd-analyze verify: sluice@.service clean"
else
  echo "   systemd-analyze is not here: the unit's syntax is not verified"
fi

echo "== the installed sluice, from the unpacked root, on a trace it makes itself"
cd "$WORK"  # nowhere near the source or build tree
"$ROOT/usr/bin/sluice" --version
"$ROOT/usr/bin/sluice" run -q "$ROOT/usr/share/doc/sluice/examples/make_trace.pipe" -D OUT="$WORK/trace.pcap" \
  --host "$ROOT/etc/sluice/laptop.yaml" > make.txt 2>&1 || { cat make.txt; fail "making a trace"; }
PORT=$((20000 + RANDOM % 20000))
COLLECT=""
if command -v nfcapd > /dev/null; then
  mkdir -p nfcapd
  nfcapd -w "$WORK/nfcapd" -p "$PORT" -b 127.0.0.1 > /dev/null 2>&1 &
  NFCAPD=$!
  sleep 1
  COLLECT=yes
fi
rc=0
"$ROOT/usr/bin/sluice" run "$ROOT/etc/sluice/flowprobe.pipe" --host "$ROOT/etc/sluice/laptop.yaml" \
  -D DEVICE="pcap:$WORK/trace.pcap" -D COLLECTOR="127.0.0.1:$PORT" -D FLOWS="$WORK/flows.csv" \
  --stats-json stats.json > run.txt 2>&1 || rc=$?
tail -4 run.txt
grep -q "every packet accounted for" run.txt || { cat run.txt; fail "packets not accounted for"; }
made=$(sed -n 's/.*records: made \([0-9]*\) .*/\1/p' run.txt)
lines=$(($(wc -l < flows.csv) - 1))
[ "${made:-0}" -gt 1000 ] || fail "the probe made ${made:-no} records"
[ "$lines" -ge "$made" ] || fail "flows.csv has $lines lines for $made records"
if [ -n "$COLLECT" ]; then
  [ "$rc" = 0 ] || { cat run.txt; fail "exit status $rc with a collector listening"; }
  kill "$NFCAPD"; wait "$NFCAPD" 2>/dev/null || true; NFCAPD=""
  flows=$(nfdump -R nfcapd -I | sed -n 's/^Flows: \([0-9]*\)/\1/p')
  [ "$flows" = "$made" ] || fail "nfcapd collected $flows flows of $made records"
  echo "   $made records made, $lines lines in flows.csv, nfcapd collected $flows"
else
  echo "   $made records made, $lines lines in flows.csv (nfdump not installed: no collector check)"
fi

echo "== the plugin library (elements/plugins), built against the unpacked SDK only, as package sluice-plugins"
for f in usr/share/cmake/Sluice/SluiceConfig.cmake usr/include/sluice/engine/runtime/element_runtime.hh; do
  [ -e "$ROOT/$f" ] || fail "/$f (the SDK) is not in the package"
done
# a copy of the sources: nothing of the source tree's engine/ can be found from there
cp -r "$SRC/elements/plugins" "$WORK/plugins-src"
cmake -S "$WORK/plugins-src" -B "$WORK/plugins" -G Ninja -DCMAKE_CXX_COMPILER=clang++-19 \
  -DCMAKE_PREFIX_PATH="$ROOT/usr" > "$WORK/plugins-configure.txt" 2>&1 || { cat "$WORK/plugins-configure.txt"; fail "configuring the plugins"; }
cmake --build "$WORK/plugins" > "$WORK/plugins-build.txt" 2>&1 || { cat "$WORK/plugins-build.txt"; fail "building the plugins"; }
[ -f "$WORK/plugins/sluice_plugins.so.bc" ] || fail "no sluice_plugins.so.bc beside the plugin"
(cd "$WORK/plugins" && cpack -G DEB > cpack.txt 2>&1) || { cat "$WORK/plugins/cpack.txt"; fail "cpack of the plugins"; }
PDEB=$(ls "$WORK"/plugins/sluice-plugins_*_amd64.deb)
echo "   $(basename "$PDEB")"
PDEPENDS=$(dpkg-deb -f "$PDEB" Depends)
VERSION=$(dpkg-deb -f "$DEB" Version)
[[ "$PDEPENDS" == *"sluice (= $VERSION)"* ]] || fail "sluice-plugins does not depend on sluice $VERSION: $PDEPENDS"
[[ "$PDEPENDS" == *libssl3* ]] || fail "sluice-plugins does not depend on libssl3 (libcrypto): $PDEPENDS"
apt-get install --simulate -q "$DEB" "$PDEB" > "$WORK/apt-simulate-plugins.txt" 2>&1 ||
  { cat "$WORK/apt-simulate-plugins.txt" >&2; fail "apt-get cannot install sluice-plugins with sluice"; }
dpkg-deb --ctrl-tarfile "$PDEB" | tar -xO ./conffiles | grep -q '^/etc/sluice/flowprobe-plugins.pipe$' ||
  fail "/etc/sluice/flowprobe-plugins.pipe is not a conffile of sluice-plugins"
dpkg-deb -x "$PDEB" "$ROOT"
PLUGIN_DIR=$(dirname "$(dpkg-deb -c "$PDEB" | awk '{ print $6 }' | grep '/sluice_plugins\.so$')")
for f in "$PLUGIN_DIR/sluice_plugins.so" "$PLUGIN_DIR/sluice_plugins.so.bc" ./etc/sluice/flowprobe-plugins.pipe; do
  [ -e "$ROOT/$f" ] || fail "$f is not in sluice-plugins"
done
echo "   apt-get would install it with sluice; unpacked: ${PLUGIN_DIR#.}"

# The installed probe with all three plugins (require "sluice_plugins.so"
# finds the installed library), on real tunnels, TLS, QUIC and DNS when the
# shared traces are there, else on the trace made above: the same records
# with --jit and --no-jit, nfcapd collecting every record of templates
# that carry the plugins' fields.
TRACE="$SRC/../shared/traces/ndpi_merged.pcap"
[ -f "$TRACE" ] || { echo "   ../shared/traces/ndpi_merged.pcap is absent: the plugins run on the made trace"; TRACE="$WORK/trace.pcap"; }
for mode in jit no-jit; do
  PORT=$((20000 + RANDOM % 20000))
  rm -rf "nfcapd-$mode" && mkdir -p "nfcapd-$mode"
  if [ -n "$COLLECT" ]; then nfcapd -w "$WORK/nfcapd-$mode" -p "$PORT" -b 127.0.0.1 > /dev/null 2>&1 & NFCAPD=$!; sleep 1; fi
  rc=0
  "$ROOT/usr/bin/sluice" run "--${mode/#jit/jit-wait}" "$ROOT/etc/sluice/flowprobe-plugins.pipe" --host "$ROOT/etc/sluice/laptop.yaml" \
    -D DEVICE="pcap:$TRACE" -D COLLECTOR="127.0.0.1:$PORT" -D FLOWS="$WORK/plugins-$mode.csv" -D TOP_K=100000 \
    > "plugins-$mode.txt" 2>&1 || rc=$?
  grep -q "every packet accounted for" "plugins-$mode.txt" || { cat "plugins-$mode.txt"; fail "plugins --$mode: packets not accounted for"; }
  sed -n '/top 5 of/,+5p' "plugins-$mode.txt" > "top-$mode.txt"
  if [ -n "$COLLECT" ]; then
    [ "$rc" = 0 ] || { cat "plugins-$mode.txt"; fail "plugins --$mode: exit status $rc with a collector listening"; }
    kill "$NFCAPD"; wait "$NFCAPD" 2>/dev/null || true; NFCAPD=""
    made=$(sed -n 's/.*records: made \([0-9]*\) .*/\1/p' "plugins-$mode.txt")
    flows=$(nfdump -R "nfcapd-$mode" -I | sed -n 's/^Flows: \([0-9]*\)/\1/p')
    [ "$flows" = "$made" ] || fail "plugins --$mode: nfcapd collected $flows flows of $made records"
  fi
done
grep -q "loop fused by the JIT" plugins-jit.txt || fail "the plugins' segments were not fused"
grep -q "TunnelDecap" <("$ROOT/usr/bin/sluice" elements --require "$ROOT/$PLUGIN_DIR/sluice_plugins.so") ||
  fail "sluice elements --require does not list the plugins' elements"
for column in server_name dns_query_name tunnel_type tunnel_id; do
  head -1 plugins-jit.csv | tr ',' '\n' | grep -qx "$column" || fail "the FlowLog lacks column $column: $(head -1 plugins-jit.csv)"
done
cmp -s <(sort plugins-jit.csv) <(sort plugins-no-jit.csv) || fail "the plugin pipeline's records differ between --jit and --no-jit"
cmp -s top-jit.txt top-no-jit.txt || fail "TopFlows differs between --jit and --no-jit"
if [ "$TRACE" != "$WORK/trace.pcap" ]; then
  with() {  # lines with a value in column $1
    awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) n = i; next } $n != ""' plugins-jit.csv | wc -l
  }
  names=$(with server_name) queries=$(with dns_query_name) tunnels=$(with tunnel_type)
  [ "$names" -gt 1000 ] && [ "$queries" -gt 500 ] && [ "$tunnels" -ge 18 ] ||
    fail "too few records with plugin fields: $names server names, $queries DNS queries, $tunnels tunnels"
  echo "   lines with a server name $names, a DNS query $queries, a tunnel $tunnels"
fi
# (sed, not head: under pipefail, head leaving early would fail the pipeline.)
# With more counters than flows the counts are exact: the five heaviest
# flows' bytes, summed from the FlowLog's lines (both directions), are
# those TopFlows ranks first.
want=$(awk -F, 'NR > 1 { a = $4 "/" $5; b = $6 "/" $7; k = $3 " " (a < b ? a " " b : b " " a); s[k] += $9 }
                END { for (k in s) print s[k] }' plugins-jit.csv | sort -rn | sed -n '1,5p' | tr '\n' ' ')
got=$(awk '/^ +[1-5]\. / { print $NF }' top-jit.txt | tr '\n' ' ')
[ "$want" = "$got" ] || { cat top-jit.txt; fail "TopFlows' five heaviest ($got) are not the FlowLog's ($want)"; }
echo "   the three plugins, fused by the JIT: the same records and top flows with --no-jit," \
     "${COLLECT:+nfcapd collected every record, }the five heaviest as the FlowLog's lines add up: $got"
echo "== the package: ok"
