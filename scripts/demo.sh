#!/usr/bin/env bash
# The main job: installs dependencies, builds the `tessera` binary and shows the bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tessera

./build/src/cli/tessera inspect models/stories260K.gguf
