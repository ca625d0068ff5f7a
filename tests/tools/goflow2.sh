#!/usr/bin/env bash
# Prints the path of a goflow2 binary (netsampler/goflow2, a collector
# nobody here wrote) for the tests, building it once from its Go module into
# a cache shared by every build directory:
#   ${XDG_CACHE_HOME:-~/.cache}/sluice/goflow2-VERSION/goflow2
# SLUICE_GOFLOW2=path uses that binary instead. Without Go (or when the
# module proxy cannot be reached) it says why on standard error and exits 1;
# the tests then skip with that reason.
set -euo pipefail
VERSION=v2.2.6
if [ -n "${SLUICE_GOFLOW2:-}" ]; then echo "$SLUICE_GOFLOW2"; exit 0; fi
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/sluice/goflow2-$VERSION
BIN=$CACHE/goflow2
if [ ! -x "$BIN" ]; then
  GO=$(command -v go || true)
  [ -n "$GO" ] || [ ! -x /usr/local/go/bin/go ] || GO=/usr/local/go/bin/go
  if [ -z "$GO" ]; then
    echo "no Go toolchain to build goflow2 $VERSION with (it needs Go 1.23 or later; Debian 12's golang-go is 1.19)" >&2
    exit 1
  fi
  mkdir -p "$CACHE"
  # one build at a time (tests run in parallel); the binary appears whole
  exec 9> "$CACHE/.lock"
  flock 9
  if [ ! -x "$BIN" ]; then
    if ! GOBIN=$CACHE/tmp GOFLAGS=-buildvcs=false "$GO" install "github.com/netsampler/goflow2/v2/cmd/goflow2@$VERSION" \
         > "$CACHE/build.log" 2>&1; then
      echo "goflow2 $VERSION could not be built with $GO: $(tail -n 3 "$CACHE/build.log" | tr '\n' ' ')" >&2
      exit 1
    fi
    mv "$CACHE/tmp/goflow2" "$BIN"
  fi
fi
echo "$BIN"
