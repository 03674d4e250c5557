#!/usr/bin/env bash
# The main job: installs dependencies, builds `tessera`, then runs a local cluster demo on the bundled model:
# two worker daemons on loopback sharing a fresh cluster key, the planner's view, the same prompt on one node
# and over the pipeline (the outputs must match), and an OpenAI-compatible server over the workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tessera
tessera=./build/src/cli/tessera
model=models/stories260K.gguf

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

section() { printf '\n== %s\n' "$1"; }

section "The model"
"$tessera" inspect "$model" | head -20

section "A cluster key, shared by the head and the workers (mode 0600)"
"$tessera" keygen -o "$work/cluster.key"

# Each worker prints "listening on HOST:PORT" once it is ready; port 0 lets the OS choose a free one. Called
# directly (not in $(...)), so the pid it records reaches the cleanup trap.
start_worker() {
  local name=$1 out="$work/$1.out"
  "$tessera" worker --listen 127.0.0.1:0 --name "$name" --key-file "$work/cluster.key" -t 1 \
    --cache "$work/cache-$name" >"$out" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 100); do
    if grep -q '^listening on ' "$out"; then sed -n 's/^listening on //p' "$out" >"$work/$name.addr"; return; fi
    sleep 0.1
  done
  echo "worker $name did not start:" >&2
  cat "$work/$name.log" >&2
  exit 1
}
section "Two worker daemons on loopback"
start_worker a
start_worker b
addr_a=$(cat "$work/a.addr")
addr_b=$(cat "$work/b.addr")
echo "a listens on $addr_a, b on $addr_b"
workers="a=$addr_a,b=$addr_b"

section "What the planner predicts for this cluster"
"$tessera" plan -m "$model" --workers "$workers" --key-file "$work/cluster.key" -p 128 || true

prompt="Once upon a time"
section "One node"
one=$("$tessera" run -m "$model" -p "$prompt" -n 48 --temp 0 -t 1)
echo "$one"

section "The same prompt over the pipeline a -> b (weights streamed once into each worker's cache)"
two=$("$tessera" run -m "$model" -p "$prompt" -n 48 --temp 0 --workers "$workers" --key-file "$work/cluster.key")
echo "$two"
if [[ "$one" == "$two" ]]; then echo "-> same output on one node and on two workers"; else
  echo "-> the outputs differ" >&2
  exit 1
fi

section "OpenAI-compatible server over the same workers (weights now come from the workers' caches)"
"$tessera" serve -m "$model" --port 0 --workers "$workers" --key-file "$work/cluster.key" \
  2>"$work/serve.log" &
pids+=($!)
port=""
for _ in $(seq 100); do
  port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$work/serve.log" | head -1)
  if [[ -n "$port" ]] && grep -q 'ready' "$work/serve.log"; then break; fi
  sleep 0.1
done
if [[ -z "$port" ]]; then cat "$work/serve.log" >&2; exit 1; fi
echo "POST http://127.0.0.1:$port/v1/completions"
curl -s "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d "{\"prompt\": \"$prompt\", \"max_tokens\": 32, \"temperature\": 0}"
echo
echo "GET http://127.0.0.1:$port/health (the nodes of the replica)"
curl -s "http://127.0.0.1:$port/health" | head -c 600
echo
echo
echo "Done. Start your own: tessera worker --listen HOST:PORT --key-file KEY, then"
echo "tessera run|bench|serve -m MODEL --workers name=HOST:PORT,... --key-file KEY (see README.md)."
