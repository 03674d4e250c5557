#!/usr/bin/env bash
# The test command: installs dependencies, builds Tessera (warnings as errors), fuzzes every parser of outside
# input for a bounded time, and runs every unit and integration test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

jobs=$(nproc)
fuzz_seconds=${TESSERA_FUZZ_SECONDS:-60}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON >/dev/null
cmake --build build -j"$jobs"

# libFuzzer targets with ASan/UBSan, in their own clang build tree.
# Scalar kernels only there: the SIMD kernels are checked against them by the kernel tests, and would double the
# sanitizer build.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DTESSERA_FUZZ=ON -DTESSERA_SIMD_KERNELS=OFF \
  -DTESSERA_FUZZ_SECONDS="$fuzz_seconds" >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_targets
# Each target fuzzes for its wall-clock budget on one core, so they run side by side.
ctest --test-dir build-fuzz -L fuzz --output-on-failure -j"$jobs"

ctest --test-dir build --output-on-failure -j"$jobs"
