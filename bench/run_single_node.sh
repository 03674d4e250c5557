#!/usr/bin/env bash
# Regenerates the single-node benchmark models (outside the repository) and prints the machine and one markdown
# table per model, with the exact commands, in the form docs/benchmarks.md records them.
#
#   bash bench/run_single_node.sh > /tmp/benchmarks-fragment.md
#
# Environment: TESSERA (the binary; built into build/ when missing), MODELS (scratch folder for the 0.6-1.2 GB
# model files, default /tmp), BENCH_ARGS (default "-p 512 -n 64 -t 1,2 -r 3").
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$root/build/src/cli/tessera}
models=${MODELS:-/tmp}
read -r -a bench_args <<<"${BENCH_ARGS:--p 512 -n 64 -t 1,2 -r 3}"

if [[ ! -x $tessera ]]; then
  echo "building $tessera" >&2
  cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$root/build" --target tessera -j "$(nproc)" >&2
fi
mkdir -p "$models"

# name|gen-model arguments (the file is reused when it already exists: generation is seeded, so it is the same)
specs=(
  "1b-q4_k_m|--preset 1b --type q4_k_m"
  "1b-q4_0|--preset 1b --type q4_0"
  "1b-q8_0|--preset 1b --type q8_0"
  "moe-small-q4_k_m|--arch qwen3moe --preset moe-small --type q4_k_m"
)

for spec in "${specs[@]}"; do
  name=${spec%%|*}
  read -r -a gen_args <<<"${spec#*|}"
  file=$models/$name.gguf
  if [[ ! -f $file ]]; then
    echo "generating $file" >&2
    "$tessera" gen-model "${gen_args[@]}" -o "$file" >&2
  fi
done

echo "Measured $(date -u +%Y-%m-%d) at commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)."
echo
echo "## The machine"
echo
echo '```'
echo "$ tessera probe"
"$tessera" probe
echo '```'

for spec in "${specs[@]}"; do
  name=${spec%%|*}
  file=$models/$name.gguf
  echo
  echo "## $name"
  echo
  echo "Model: \`tessera gen-model ${spec#*|} -o $file\`"
  echo
  echo "Command: \`tessera bench -m $file ${bench_args[*]}\`"
  echo
  "$tessera" bench -m "$file" "${bench_args[@]}"
done
