#!/usr/bin/env bash
# Sluice developer entry point: one script that installs, builds, tests and demos.
#   ./build.sh deps    install the Debian 12 packages the project needs (apt-get)
#   ./build.sh build   configure and build into build/ (runs deps first if needed)
#   ./build.sh test    build, then run the whole test suite (ctest) and the fuzz smoke run
#   ./build.sh demo    build, then run the default probe on the project's own trace
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
BUILD=${SLUICE_BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}

# Packages: build toolchain, the fixed dependencies (DESIGN §13), and the tools tests use.
PACKAGES=(build-essential cmake ninja-build pkg-config
          clang-19 llvm-19-dev libclang-rt-19-dev
          libdpdk-dev re2c bison libyaml-dev catch2 libpcap-dev libnuma-dev libcli11-dev
          libcpp-httplib-dev
          graphviz tshark tcpdump
          prometheus  # promtool checks the metrics endpoint's output
          nfdump pmacct softflowd)  # collectors and a flow meter the tests and benchmarks compare with

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
      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19
  fi
  cmake --build "$BUILD" -j "$JOBS"
}

test_all() {
  build
  (cd "$BUILD" && ctest --output-on-failure -j "$JOBS")
  fuzz_smoke
}

# Bounded libFuzzer runs: the .pipe front end from a seed corpus (every .pipe
# in the repository), then the packet parser from nothing.
fuzz_smoke() {
  local secs=${SLUICE_FUZZ_SECONDS:-60}
  local corpus="$BUILD/fuzz-corpus"
  rm -rf "$corpus" "$corpus-packets" && mkdir -p "$corpus" "$corpus-packets"
  find configs examples tests/dsl -name '*.pipe' -exec cp -t "$corpus" {} +
  echo "== fuzzing the .pipe front end for ${secs}s"
  "$BUILD/tests/fuzz_pipe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$corpus" 2>&1 | grep -E '^(stat::|Done|==|SUMMARY)' 
  echo "== fuzzing the packet parser for $((secs / 2))s"
  "$BUILD/tests/fuzz_packet" -max_total_time="$((secs / 2))" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$corpus-packets" 2>&1 | grep -E '^(stat::|Done|==|SUMMARY)'
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
  *) echo "usage: $0 deps|build|test|fuzz|demo" >&2; exit 2 ;;
esac
