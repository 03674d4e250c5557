#!/usr/bin/env bash
# Distributed benchmark: 2 (or more) workers, each pinned to its own core, on loopback or in network namespaces
# with shaped links and added latency (the test harness tests/netns/netns_cluster.sh), against one node pinned to
# one core. Prints both `tessera bench` JSON results and a table of ratios.
#
#   bash bench/run_distributed.sh -m /tmp/1b-q4_k_m.gguf
#   bash bench/run_distributed.sh -m /tmp/1b-q4_k_m.gguf --mode netns --rate 1gbit --delay-ms 1 --concurrency 4
#
# Options (defaults in brackets):
#   -m MODEL             the GGUF file (required)
#   --mode M             loopback or netns [loopback]; netns needs root
#   --rate RATE          tbf rate per link in netns mode: 1gbit, 10gbit, ... [none]
#   --delay-ms MS        one-way delay per link from tessera-relay [0]
#   --workers N          number of workers [2]
#   --cpus LIST          the workers' cores, one each [1,2,... when there are enough cores, else 0,1,...]
#   --head-cpu C         the head's core [0]; the one-node run uses the first worker's core
#   -p P -n N -r R       prompt length, generated tokens, repetitions [512, 64, 3]
#   --concurrency C      sequences decoded at once, in both runs (passed to tessera bench) [unset]
#   --split SPEC         passed to tessera bench [even split over the workers]
#   --bench-arg ARG      one more argument for both tessera bench runs (repeatable), e.g. --no-probe
#   --repack             pack weights at load on the one node and on every worker (tessera --repack)
#   --build DIR          the build tree with tessera, tessera-relay [build]
#   --rounds N           alternate one node and the cluster N times and report each round's ratio and their
#                        median: this VM's speed drifts by 10-30% within minutes, so one pair can mislead [1]
#   --out DIR            where one-node-R.json, distributed-R.json and the worker logs go [a temporary folder]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model=""
mode=loopback
rate=none
delay_ms=0
n_workers=2
cpus=""
head_cpu=0
n_prompt=512
n_gen=64
reps=3
concurrency=""
split=""
build="$root/build"
out=""
extra=()
repack=0
rounds=1

die() {
  echo "run_distributed: $*" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --delay-ms) delay_ms="$2"; shift 2 ;;
    --workers) n_workers="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --head-cpu) head_cpu="$2"; shift 2 ;;
    -p) n_prompt="$2"; shift 2 ;;
    -n) n_gen="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --split) split="$2"; shift 2 ;;
    --bench-arg) extra+=("$2"); shift 2 ;;
    --repack) repack=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) die "unknown option '$1' (see the usage at the top of $0)" ;;
  esac
done
[ -n "$model" ] || die "-m MODEL is required"
[ -f "$model" ] || die "no model at $model"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive whole number, got '$rounds'"
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
tessera="$build/src/cli/tessera"
[ -x "$tessera" ] || die "no tessera at $tessera (build it: ninja -C $build tessera tessera-relay)"
if ! "$tessera" bench --help 2>/dev/null | grep -q -- "--workers"; then
  die "this tessera bench has no --workers option yet (issue 5 item 2); nothing to compare"
fi

ncpu=$(nproc)
if [ -z "$cpus" ]; then
  first=1
  [ "$ncpu" -gt "$n_workers" ] || first=0
  cpus=$(seq -s, "$first" $((first + n_workers - 1)))
fi
IFS=, read -r -a cpu_list <<<"$cpus"
[ "${#cpu_list[@]}" -ge "$n_workers" ] || die "--cpus lists ${#cpu_list[@]} cores for $n_workers workers"
for c in "${cpu_list[@]}" "$head_cpu"; do
  [[ "$c" =~ ^[0-9]+$ && "$c" -lt "$ncpu" ]] || die "core '$c' does not exist (this machine has $ncpu)"
done

if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-dist.XXXXXX")
fi
mkdir -p "$out"

bench_args=(-m "$model" -p "$n_prompt" -n "$n_gen" -t 1 -r "$reps" -o json ${extra[@]+"${extra[@]}"})
[ "$repack" == 0 ] || bench_args+=(--repack)
# Both runs decode the same number of sequences at once, so the ratio compares like with like.
[ -z "$concurrency" ] || bench_args+=(--concurrency "$concurrency")
dist_args=("${bench_args[@]}")
[ -z "$split" ] || dist_args+=(--split "$split")
harness=(--mode "$mode" --workers "$n_workers" --cpus "$cpus" --threads 1 --bin-dir "$build" --log-dir "$out/logs"
  --delay-ms "$delay_ms" --worker-arg --models --worker-arg "$(dirname "$model")")
[ "$rate" == none ] || harness+=(--rate "$rate")
[ "$repack" == 0 ] || harness+=(--worker-arg --repack)

for round in $(seq 1 "$rounds"); do
  echo "round $round of $rounds: one node on core ${cpu_list[0]}: tessera bench ${bench_args[*]}" >&2
  taskset -c "${cpu_list[0]}" "$tessera" bench "${bench_args[@]}" >"$out/one-node-$round.json"
  echo "round $round of $rounds: $n_workers workers on cores $cpus ($mode, rate $rate, ${delay_ms} ms each way), head on core $head_cpu" >&2
  # The worker list and key exist only once the harness has started the cluster, so the inner shell reads them.
  # shellcheck disable=SC2016
  bash "$root/tests/netns/netns_cluster.sh" "${harness[@]}" -- \
    bash -c 'exec taskset -c "$0" "$1" bench "${@:2}" --workers "$TESSERA_NET_WORKERS" --key-file "$TESSERA_NET_KEY"' \
    "$head_cpu" "$tessera" "${dist_args[@]}" >"$out/distributed-$round.json"
  echo "## round $round: one node (core ${cpu_list[0]})"
  cat "$out/one-node-$round.json"
  echo "## round $round: $n_workers workers ($mode, rate $rate, ${delay_ms} ms each way)"
  cat "$out/distributed-$round.json"
done

echo "## distributed / one node (tokens per second)"
# Tests are matched by prompt and generation lengths and concurrency; one line per round, then the median ratio.
for round in $(seq 1 "$rounds"); do
  jq -r --arg round "$round" --slurpfile one "$out/one-node-$round.json" '
    .[] as $d
    | ($one[0][] | select(.n_prompt == $d.n_prompt and .n_gen == $d.n_gen and (.concurrency // 1) == ($d.concurrency // 1))) as $o
    | "pp\($d.n_prompt) tg\($d.n_gen) concurrency \($d.concurrency // 1): round \($round): \($d.avg_ts | . * 100 | round / 100) vs \($o.avg_ts | . * 100 | round / 100) t/s = \(($d.avg_ts / $o.avg_ts) * 100 | round / 100)x, wire bytes/token \($d.wire_bytes_per_token // "n/a")"
  ' "$out/distributed-$round.json"
done
if [ "$rounds" -gt 1 ]; then
  jq -rn '
    [inputs] as $files
    | ($files | length / 2) as $n
    | [range(0; $n) as $r | $files[$r] as $one | $files[$n + $r][] as $d
       | ($one[] | select(.n_prompt == $d.n_prompt and .n_gen == $d.n_gen and (.concurrency // 1) == ($d.concurrency // 1))) as $o
       | {key: "pp\($d.n_prompt) tg\($d.n_gen) concurrency \($d.concurrency // 1)", ratio: ($d.avg_ts / $o.avg_ts)}]
    | group_by(.key)[]
    | (map(.ratio) | sort) as $r
    | (if ($r | length) % 2 == 1 then $r[($r | length - 1) / 2] else ($r[($r | length) / 2 - 1] + $r[($r | length) / 2]) / 2 end) as $median
    | "\(.[0].key): median of \($r | length) rounds \($median * 100 | round / 100)x (\($r | map(. * 100 | round / 100) | join(" / ")))"
  ' $(for r in $(seq 1 "$rounds"); do echo "$out/one-node-$r.json"; done) \
    $(for r in $(seq 1 "$rounds"); do echo "$out/distributed-$r.json"; done)
fi
echo "(results in $out)" >&2
