#!/bin/sh
# CMake's compiler launcher for the bitcode build of the elements: called as
#   compile_bitcode.sh CLANG BUILD-COMPILER ARGS...
# it runs clang 19 with the build's own arguments (includes, defines,
# dependency file, output) and makes LLVM bitcode instead of machine code.
# Optimized (-O2) whatever the build type, so that the JIT starts from the
# code the native build would run; no debug info; DPDK's byte swaps as
# intrinsics rather than inline asm (PLATFORM.md). Never instrumented by a
# sanitizer build: fused loops call the host's (instrumented) functions.
clang="$1"
shift 2
exec "$clang" "$@" -emit-llvm -O2 -g0 -DRTE_FORCE_INTRINSICS -DSLUICE_BITCODE -fno-sanitize=all
