#!/usr/bin/env bash
# The test command: installs dependencies, builds Tessera (warnings as errors), fuzzes every parser of outside
# input for a bounded time, runs every unit and integration test with CTest, then the threaded ones under
# ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

jobs=$(nproc)
fuzz_seconds=${TESSERA_FUZZ_SECONDS:-30}

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

# ThreadSanitizer over the threaded server and cluster tests, in-process (docs/sanitizers.md); the first race fails
# its test. TESSERA_TSAN=0 skips this tree for a quicker local run.
if [ "${TESSERA_TSAN:-1}" != 0 ]; then
  CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_TSAN=ON \
    -DTESSERA_SIMD_KERNELS=OFF >/dev/null
  cmake --build build-tsan -j"$jobs" --target tsan_targets
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir build-tsan -L tsan --output-on-failure -j"$jobs"
fi
