#!/bin/bash
# Every figure of docs/perf-log/probe-roofline.md's "quiet machine" section in one run: single node (cores 0-1), a 2-worker
# pipeline (workers on cores 2 and 3, head on core 4) against one node on core 2, and batched decode through the
# server (clients on core 5) and in the engine. Needs 6 cores and python3.
#   TESSERA=build/src/cli/tessera OUT=/tmp/bench-out bash bench/run_all_figures.sh    (PHASE=single|dist|serve|all)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
T=${TESSERA:-$root/build/src/cli/tessera}
O=${OUT:-/tmp/tessera-bench-out}; mkdir -p "$O"
exec > >(tee -a "$O/log.txt") 2>&1
S=$(date +%s)
# Pinned on a machine with the cores for it; unpinned (figures not comparable) on a smaller one.
# Always called in a subshell, `(pin CPUS CMD...)`: it execs, so `$!` of a background one is the command's own pid.
pin() { if (($(nproc) >= 6)); then exec taskset -c "$@"; else shift; exec "$@"; fi; }
el() { echo "[+$(( $(date +%s) - S )) s] $*"; }
lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|NUMA node\(|L3|Flags" | cut -c1-300
free -g | head -2; uptime
M=${MODELS:-/dev/shm/tessera-models}; mkdir -p $M
gen() { [ -f $M/$1.gguf ] || $T gen-model $2 -o $M/$1.gguf -t 16 >/dev/null 2>&1; }
gen 1b-q4_k_m "--preset 1b --type q4_k_m"; el gen1
gen 1b-q4_0 "--preset 1b --type q4_0"; gen 1b-q8_0 "--preset 1b --type q8_0"
gen moe-small-q4_k_m "--arch qwen3moe --preset moe-small --type q4_k_m"; el gen-all
ls -la $M
PHASE=${PHASE:-all}
if [[ $PHASE == all || $PHASE == single ]]; then
el "single node"
echo '$ taskset -c 0,1 tessera bench -m 1b-q4_k_m.gguf -p 512 -n 64 -t 1,2 -r 3'
(pin 0,1 $T bench -m $M/1b-q4_k_m.gguf -p 512 -n 64 -t 1,2 -r 3 --no-plan) 2>&1 | grep -v "^bench:.*warm"
for m in 1b-q4_0 1b-q8_0 moe-small-q4_k_m; do
  el $m
  echo "\$ taskset -c 0,1 tessera bench -m $m.gguf -p 512 -n 64 -t 2 -r 3"
  (pin 0,1 $T bench -m $M/$m.gguf -p 512 -n 64 -t 2 -r 3 --no-plan) 2>&1 | grep -v "^bench:.*warm"
done
fi
if [[ $PHASE == all || $PHASE == dist ]]; then
el "distributed"
D=/dev/shm/w; mkdir -p $D/a $D/b; ln -sf $M/1b-q4_k_m.gguf $D/a/; ln -sf $M/1b-q4_k_m.gguf $D/b/
(pin 2 $T worker --listen 127.0.0.1:50061 --name a --models $D/a -t 1) 2>$O/wa.log >/dev/null &
WA=$!
(pin 3 $T worker --listen 127.0.0.1:50062 --name b --models $D/b -t 1) 2>$O/wb.log >/dev/null &
WB=$!
sleep 1
echo '$ taskset -c 2 tessera bench -m 1b-q4_k_m.gguf -p 512 -n 64 -t 1 --np 1,4 -r 3'
(pin 2 $T bench -m $M/1b-q4_k_m.gguf -p 512 -n 64 -t 1 --np 1,4 -r 3 --no-plan) 2>&1 | grep -v "warm"
el "pipeline"
echo '$ taskset -c 4 tessera bench -m 1b-q4_k_m.gguf -p 512 -n 64 -t 1 --np 1,4 -r 3 --workers a=127.0.0.1:50061,b=127.0.0.1:50062  --check-plan  # a on core 2, b on core 3'
(pin 4 $T bench -m $M/1b-q4_k_m.gguf -p 512 -n 64 -t 1 --np 1,4 -r 3 --workers a=127.0.0.1:50061,b=127.0.0.1:50062 --check-plan) 2>&1 | grep -v "warm\|sending weights"
kill $WA $WB; wait $WA $WB 2>/dev/null
fi
if [[ $PHASE == all || $PHASE == serve ]]; then
el "serve: aggregate decode at 1 and 8 concurrent clients, --parallel 8, 2 cores"
(pin 0,1 $T serve -m $M/1b-q4_k_m.gguf --port 0 --parallel 8 -t 2) 2>$O/serve.log &
SP=$!
port=""
for _ in $(seq 600); do
  port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' $O/serve.log | head -1)
  [[ -n $port ]] && grep -q ready $O/serve.log && break
  sleep 0.1
done
for c in 1 8; do
  echo "\$ python3 bench/serve_parallel.py --url http://127.0.0.1:PORT --clients $c --seconds 20 --max-tokens 64"
  (pin 5 python3 $root/bench/serve_parallel.py --url http://127.0.0.1:$port --clients $c --seconds 20 --max-tokens 64)
done
kill $SP; wait $SP 2>/dev/null
echo '$ taskset -c 0,1 tessera bench -m 1b-q4_k_m.gguf -p 16 -n 64 -t 2 --np 1,8 -r 3'
(pin 0,1 $T bench -m $M/1b-q4_k_m.gguf -p 16 -n 64 -t 2 --np 1,8 -r 3 --no-plan) 2>&1 | grep -v warm
fi
el done
