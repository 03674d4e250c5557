#!/usr/bin/env bash
# The documented set of network scenarios (issue 6, "Shown by"): for each, a cluster from the test harness
# (tests/netns/netns_cluster.sh), the head and every worker pinned to a core of its own, and one `tessera bench` run
# from the head against it, by default with --check-plan (planner's predictions against measured tokens/s, and the
# planner's own choice run too and compared with the fastest). Needs root. Nodes must not share a core: the
# planner takes each for a machine of its own. With 2 cores that is the head plus one worker.
#
#   bash bench/netns/scenarios.sh -m /tmp/1b-q4_k_m.gguf > /tmp/scenarios.txt
#   bash bench/netns/scenarios.sh -m MODEL --only 1gbit-5ms -- -p 512 -n 64 -r 3 -t 1 -o json
#
# Options: -m MODEL (required), --build DIR [build], --workers N [2 with 3+ cores, else 1],
# --cpus LIST (the workers' cores) [1,2,...], --head-cpu C [0], --only NAME (one scenario). After --, the tessera
# bench arguments [--check-plan -p 512 -n 64 -r 1 -t 1].
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build"
model=""
only=""
cpus=""
n_workers=""
head_cpu=0
die() {
  echo "scenarios: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --workers) n_workers="$2"; shift 2 ;;
    --head-cpu) head_cpu="$2"; shift 2 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see the usage at the top of $0)" ;;
  esac
done
[ -f "$model" ] || die "-m MODEL: no model at '$model'"
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
bench_args=("$@")
[ ${#bench_args[@]} -gt 0 ] || bench_args=(--check-plan -p 512 -n 64 -r 1 -t 1)
if [ -z "$n_workers" ]; then
  if [ "$(nproc)" -gt 2 ]; then n_workers=2; else n_workers=1; fi
fi
[ -n "$cpus" ] || cpus=$(seq -s, 1 "$n_workers")

# name | harness options (link shaping and latency)
scenarios=(
  "loopback|--mode loopback"
  "10gbit|--rate 10gbit"
  "10gbit-rtt1ms|--rate 10gbit --delay-ms 0.5"
  "1gbit|--rate 1gbit"
  "1gbit-5ms|--rate 1gbit --delay-ms 5"
)

found=0
for spec in "${scenarios[@]}"; do
  name="${spec%%|*}"
  [ -z "$only" ] || [ "$only" == "$name" ] || continue
  found=1
  read -r -a harness <<<"${spec#*|}"
  echo "## $name (${spec#*|}; workers on cores $cpus, head on core $head_cpu)"
  echo
  echo '```'
  # shellcheck disable=SC2016  # the inner shell expands the harness's variables
  bash "$root/tests/netns/netns_cluster.sh" --bin-dir "$build" --workers "$n_workers" --cpus "$cpus" --threads 1 \
    --worker-arg --models --worker-arg "$(dirname "$model")" "${harness[@]}" -- \
    bash -c 'exec taskset -c "$0" "$1" bench -m "$2" "${@:3}" --workers "$TESSERA_NET_WORKERS" \
             --key-file "$TESSERA_NET_KEY"' "$head_cpu" "$build/src/cli/tessera" "$model" "${bench_args[@]}" 2>&1
  echo '```'
  echo
done
[ "$found" -eq 1 ] || die "no scenario named '$only' (names: $(printf '%s ' "${scenarios[@]%%|*}"))"
