#!/usr/bin/env bash
# Sluice developer entry point: one script that installs, builds, tests and demos.
#   ./build.sh deps    install the Debian 12 packages the project needs (apt-get)
#   ./build.sh build   configure and build into build/ (runs deps first if needed)
#   ./build.sh test    build, then run the whole test suite (ctest), the fuzz smoke run, and the
#                      suite under ASan+UBSan and (reload, control) TSan
#   ./build.sh demo    build, then run the default probe on the project's own trace
#   ./build.sh package build the Debian package (build/sluice_VERSION_amd64.deb) and check it:
#                      dependencies, contents, the installed sluice run from an unpacked root
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
BUILD=${SLUICE_BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}

# Packages: build toolchain, the fixed dependencies (DESIGN §13), and the tools tests use.
PACKAGES=(build-essential cmake ninja-build pkg-config
          clang-19 llvm-19-dev libclang-rt-19-dev
          libdpdk-dev re2c bison libyaml-dev catch2 libpcap-dev libnuma-dev libcli11-dev
          libcpp-httplib-dev libsystemd-dev libspdlog-dev
          libssl-dev  # the plugin library: QUIC Initial decryption (libcrypto)
          help2man dpkg-dev file  # the man page from the CLI's help; the .deb (CPack, dpkg-shlibdeps)
          graphviz tshark tcpdump
          prometheus  # promtool checks the metrics endpoint's output
          nfdump pmacct softflowd  # collectors and a flow meter the tests and benchmarks compare with
          librdkafka-dev  # KafkaExporter's producer
          default-jre-headless maven)  # the Kafka broker the tests start (tests/kafka/fetch_kafka.sh)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

build() {
  deps
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_INSTALL_PREFIX=/usr
  fi
  cmake --build "$BUILD" -j "$JOBS"
}

# The Debian package, and the check that it installs and runs on its own.
package() {
  build
  tests/package/check_package.sh "$BUILD"
}

test_all() {
  build
  (cd "$BUILD" && ctest --output-on-failure -j "$JOBS")
  tests/package/check_package.sh "$BUILD"
  fuzz_smoke
  [ "${SLUICE_SANITIZERS:-1}" = 0 ] || sanitized_tests
}

# The test suite again under sanitizers, each in a build of its own:
# AddressSanitizer with UndefinedBehaviorSanitizer, every test but two; then
# ThreadSanitizer, the hot-reload and control tests and the trace reader's
# threads (reading ahead, bringing a mapping's pages in, packets pointing
# into the mapping freed on other threads; threads meet there), and a
# segment's own time read from another thread.
# Any report fails the test it happened in. SLUICE_SANITIZERS=0 skips them.
TSAN_TESTS='reload|ctl|control|reading ahead|mapped trace|brought in ahead|handed on in place|in-place records|its own time is'  # the names of the tests run under ThreadSanitizer
sanitized_tests() {
  local asan="$BUILD-asan" tsan="$BUILD-tsan"
  sanitized_build "$asan" address,undefined
  echo "== the test suite under AddressSanitizer and UndefinedBehaviorSanitizer"
  # Not the soak (ThreadSanitizer runs it, and the reload tests run here) nor
  # the documented commands (each runs here in the test of what it does):
  # four minutes of cpu, two of CI, for nothing more.
  (cd "$asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure -j "$JOBS" -E '^(soak|docs): ')
  # Only the test files that hold a test it runs (the probe and its
  # libraries are built whole).
  local tsan_tests
  tsan_tests=$(grep -lE "TEST_CASE\\(\"[^\"]*($TSAN_TESTS)" tests/unit/*.cc | xargs -n1 basename -s .cc | paste -sd';')
  sanitized_build "$tsan" thread -DSLUICE_UNIT_TESTS="$tsan_tests"
  echo "== the reload, control and read-ahead tests under ThreadSanitizer"
  # Not the Kafka ones: librdkafka starts its threads with C11 thrd_create,
  # which glibc runs without going through pthread_create, so TSan never
  # registers them and crashes in its allocator on their first malloc.
  # Nor the two longest reload tests (a FlowLog's format changed, 50
  # switches: 3 and 2.5 minutes here): the soak makes the same switches
  # under traffic, and they run under AddressSanitizer.
  (cd "$tsan" && TSAN_OPTIONS=halt_on_error=1 SLUICE_SOAK_RELOADS=30 \
     ctest --output-on-failure -j "$JOBS" -R "$TSAN_TESTS" -E 'Kafka|FlowLog whose format changes|50 switches under traffic')
}

sanitized_build() {  # DIR SANITIZERS [CMAKE_ARGS...]: the tests and what they run, nothing else
  if [ ! -f "$1/build.ninja" ]; then
    cmake -S "$ROOT" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 -DSLUICE_SANITIZE="$2" "${@:3}"
  fi
  echo "== building under -fsanitize=$2 in $1"
  cmake --build "$1" -j "$JOBS" --target sluice_tests
}

# Bounded libFuzzer runs, about 2.5 minutes in all, each from a seed corpus
# made from the repository: the .pipe front end (every .pipe), the packet
# parser (from nothing), -D values (tests/fuzz/defines.seeds), host profiles
# and placement on them (every profile in configs/ and the golden tests), and
# trace files (small pcaps made here with text2pcap, and the link-type traces
# of ../shared/traces when they are there). A crash or a sanitizer report
# fails the run; what it found is in $BUILD/fuzz-artifacts.
fuzz_smoke() {
  local secs=${SLUICE_FUZZ_SECONDS:-40}
  local corpus="$BUILD/fuzz-corpus"
  local all=("$corpus" "$corpus-packets" "$corpus-defines" "$corpus-profiles" "$corpus-pcaps" "$corpus-control"
             "$corpus-reload" "$corpus-plugins")
  rm -rf "${all[@]}"
  mkdir -p "${all[@]}" "$BUILD/fuzz-artifacts"
  find configs examples tests/dsl -name '*.pipe' -exec cp -t "$corpus" {} +
  local n=0 i v w
  while IFS=$'\t' read -r i v w; do
    [[ -z "$i" || "$i" == \#* ]] && continue
    n=$((n + 1))
    printf "\\x$(printf %02x "$i")%s\n%s" "$v" "$w" > "$corpus-defines/seed$n"
  done < tests/fuzz/defines.seeds
  cp configs/*.yaml tests/golden/placement/*.yaml "$corpus-profiles"
  pcap_seeds "$corpus-pcaps"
  run_fuzzer fuzz_pipe "$secs" "$corpus"
  run_fuzzer fuzz_packet "$((secs / 2))" "$corpus-packets"
  run_fuzzer fuzz_defines "$((secs * 2 / 3))" "$corpus-defines"
  run_fuzzer fuzz_host_profile "$((secs * 2 / 3))" "$corpus-profiles"
  run_fuzzer fuzz_pcap "$((secs / 2))" "$corpus-pcaps"
  plugin_seeds "$corpus-plugins"
  run_fuzzer fuzz_plugin_parsers "$((secs / 2))" "$corpus-plugins"
  run_fuzzer fuzz_control "$((secs / 2))" "$corpus-control" -dict=tests/fuzz/fuzz_control.dict
  reload_pairs "$corpus-reload"
  run_fuzzer fuzz_reload_plan "$((secs / 2))" "$corpus-reload"
}

# Seeds for the reload plan: each configuration followed by the next, and by
# itself with other numbers (what an operator changes), separated by "===".
reload_pairs() {
  local out=$1 files=(configs/*.pipe examples/*.pipe tests/dsl/valid/*.pipe) i
  for ((i = 0; i < ${#files[@]}; i++)); do
    { cat "${files[$i]}"; printf '\n===\n'; cat "${files[$(((i + 1) % ${#files[@]}))]}"; } > "$out/next$i"
    { cat "${files[$i]}"; printf '\n===\n'; sed 's/1M/2M/; s/15s/20s/; s/64K/4K/' "${files[$i]}"; } > "$out/self$i"
  done
}

# run_fuzzer NAME SECONDS CORPUS: one bounded libFuzzer run, its summary shown.
run_fuzzer() {  # TARGET SECONDS CORPUS [libFuzzer flags...]
  local target=$1 secs=$2 corpus=$3
  shift 3
  echo "== fuzzing $target for ${secs}s"
  "$BUILD/tests/$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$BUILD/fuzz-artifacts/" -print_final_stats=1 "$@" "$corpus" 2>&1 |
    grep -E '^(stat::|Done|==|SUMMARY)'
}

# Small trace files for fuzz_pcap: Ethernet (a TCP SYN, a tagged IPv6 UDP
# packet) as pcap, nanosecond pcap and pcapng; raw IP; Linux cooked capture.
# Seeds for fuzz_plugin_parsers: frames with tunnels, ClientHellos, QUIC
# Initials and DNS queries from the shared real trace (when it is there),
# one file each, raw bytes (tcpdump -xx, turned back into bytes by perl).
plugin_seeds() {
  local out=$1 trace="$ROOT/../shared/traces/ndpi_merged.pcap" tmp
  [ -f "$trace" ] || return 0
  tmp=$(mktemp)
  local filter
  for filter in vxlan gtp gre 'tls.handshake.type == 1' 'quic.long.packet_type == 0' dns; do
    tshark -r "$trace" -Y "$filter" -w "$tmp" > /dev/null 2>&1 || continue
    tcpdump -r "$tmp" -xx -c 60 2> /dev/null
  done | perl -e '
    my ($n, $hex) = (0, "");
    sub emit {
      return if $hex eq "";
      open(my $f, ">", sprintf("%s/frame%04d", $ARGV[0], ++$n)) or die "$!";
      binmode $f;
      print $f pack("H*", $hex);
      close $f;
      $hex = "";
    }
    while (<STDIN>) {
      if (/^\s+0x[0-9a-f]+:\s+([0-9a-f ]+)/) { (my $x = $1) =~ s/\s//g; $hex .= $x } else { emit() }
    }
    emit();' "$out"
  rm -f "$tmp"
}

pcap_seeds() {
  local out=$1 tmp
  tmp=$(mktemp -d)
  cat > "$tmp/eth.txt" <<'HEX'
0000  00 11 22 33 44 55 66 77 88 99 aa bb 08 00 45 00
0010  00 28 00 01 00 00 40 06 00 00 0a 00 00 01 0a 00
0020  00 02 04 d2 01 bb 00 00 00 01 00 00 00 00 50 02
0030  20 00 00 00 00 00
0000  00 11 22 33 44 55 66 77 88 99 aa bb 81 00 00 64
0010  86 dd 60 00 00 00 00 10 11 40 fe 80 00 00 00 00
0020  00 00 00 00 00 00 00 00 00 01 fe 80 00 00 00 00
0030  00 00 00 00 00 00 00 00 00 02 00 35 00 35 00 10
0040  00 00 01 02 03 04 05 06 07 08
HEX
  cat > "$tmp/raw.txt" <<'HEX'
0000  60 00 00 00 00 10 11 40 fe 80 00 00 00 00 00 00
0010  00 00 00 00 00 00 00 01 fe 80 00 00 00 00 00 00
0020  00 00 00 00 00 00 00 02 00 35 00 35 00 10 00 00
0030  01 02 03 04 05 06 07 08
0000  45 00 00 1c 00 02 00 00 40 11 00 00 0a 00 00 01
0010  0a 00 00 02 00 35 00 35 00 08 00 00
HEX
  cat > "$tmp/sll.txt" <<'HEX'
0000  00 00 00 01 00 06 00 11 22 33 44 55 00 00 08 00
0010  45 00 00 1c 00 02 00 00 40 11 00 00 0a 00 00 01
0020  0a 00 00 02 00 35 00 35 00 08 00 00
HEX
  local log  # text2pcap is chatty even with -q: its output is shown only when it fails
  if ! log=$( {
    text2pcap -q -F pcap -l 1 "$tmp/eth.txt" "$out/eth.pcap" &&
    text2pcap -q -F pcapng -l 1 "$tmp/eth.txt" "$out/eth.pcapng" &&
    editcap -F nsecpcap "$out/eth.pcap" "$out/eth-ns.pcap" &&
    text2pcap -q -F pcap -l 101 "$tmp/raw.txt" "$out/raw.pcap" &&
    text2pcap -q -F pcap -l 113 "$tmp/sll.txt" "$out/sll.pcap"
  } 2>&1 ); then
    echo "$log" >&2
    return 1
  fi
  rm -rf "$tmp"
  if [ -d ../shared/traces/linktypes ]; then
    find ../shared/traces/linktypes -size -64k -name '*.pcap*' -exec cp -t "$out" {} +
  fi
}

demo() {
  build
  local sluice="$BUILD/engine/sluice"
  if [ ! -f examples/traces/demo.pcap ]; then
    echo "== making the demo trace: sluice run examples/make_trace.pipe"
    "$sluice" run examples/make_trace.pipe
  fi
  # A real collector receives the probe's IPFIX: nfdump's nfcapd on the
  # default probe's collector address.
  local collected="$BUILD/demo-collector" nfcapd_pid=""
  rm -rf "$collected" && mkdir -p "$collected"
  if command -v nfcapd > /dev/null; then
    nfcapd -w "$collected" -p 4739 -b 127.0.0.1 > "$collected.log" 2>&1 &
    nfcapd_pid=$!
    sleep 1
  fi
  echo "== sluice run configs/flowprobe.pipe (the default probe: 2 lanes, IPFIX to 127.0.0.1:4739, FlowLog to flows.csv)"
  local status=0
  rm -f flows.csv  # FlowLog appends to a file it finds: the demo shows this run's flows
  "$sluice" run configs/flowprobe.pipe || status=$?
  echo "== the first flows of flows.csv ($(($(wc -l < flows.csv) - 1)) lines; a biflow is two lines)"
  head -15 flows.csv | column -t -s,
  if [ -n "$nfcapd_pid" ]; then
    kill "$nfcapd_pid" && wait "$nfcapd_pid" || true
    echo "== what nfcapd collected over IPFIX (nfdump -R $collected)"
    nfdump -R "$collected" -o line -c 10 2>/dev/null || true
    nfdump -R "$collected" -I 2>/dev/null | grep -E '^(Flows|Packets|Bytes|Sequence failures):' || true
  fi
  return "$status"
}

case "${1:-build}" in
  deps) deps ;;
  build) build ;;
  test) test_all ;;
  fuzz) build; fuzz_smoke ;;
  demo) demo ;;
  package) package ;;
  *) echo "usage: $0 deps|build|test|fuzz|demo|package" >&2; exit 2 ;;
esac
