#!/usr/bin/env bash
# Tensor parallel over worker links against the planner (issue 42, "Shown by"): for each RTT, a cluster of the head
# and one worker from the test harness (tests/netns/netns_cluster.sh: tbf rate on every veth, the user-space relay
# adding latency in front of the worker), the head and the worker each pinned to a core of its own. In each
# scenario: `tessera plan --workers` (what the planner predicts for local, the worker alone, its pipeline and --tp 2 from the links it
# measures, and its choice), then `tessera bench` for each of the four (prefill pp512, decode tg64), and one table
# row per layout: predicted against measured, and whether the planner's choice was the measured fastest. Needs root
# and a quiet machine with at least 2 cores (the figures of a loaded machine measure the other load).
#
#   bash bench/netns/tp_scenarios.sh -m /tmp/1b-q4_k_m.gguf > /tmp/tp-scenarios.txt
#   bash bench/netns/tp_scenarios.sh -m MODEL --rtt-ms "0.2" --rate 10gbit -- -r 3
#
# Options: -m MODEL (required; tessera gen-model --preset 1b --type q4_k_m -o /tmp/1b-q4_k_m.gguf), --build DIR
# [build], --rate RATE [10gbit], --rtt-ms "LIST" [0.05 0.2 1], --cpus HEAD,WORKER [0,1], -p PROMPT [512],
# -n TOKENS [64], --wire-type T [f16]. After --, more tessera bench arguments [-r 1].
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build"
model=""
rate=10gbit
rtts="0.05 0.2 1"
cpus="0,1"
prompt=512
gen=64
wire=f16
die() {
  echo "tp_scenarios: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --rtt-ms) rtts="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    -p) prompt="$2"; shift 2 ;;
    -n) gen="$2"; shift 2 ;;
    --wire-type) wire="$2"; shift 2 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see the usage at the top of $0)" ;;
  esac
done
[ -f "$model" ] || die "-m MODEL: no model at '$model'"
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
extra=("$@")
[ ${#extra[@]} -gt 0 ] || extra=(-r 1)
head_cpu=${cpus%%,*}
worker_cpu=${cpus#*,}
tessera="$build/src/cli/tessera"
[ -x "$tessera" ] || die "no tessera binary at '$tessera'"
command -v python3 >/dev/null || die "python3 is needed to read the JSON"

# The commands run inside the harness, in the head's namespace: the plan, then the three layouts.
inner=$(cat <<'INNER'
set -euo pipefail
out="$OUT_DIR"
# plan probes this process's CPUs (taskset's one core) now, not from a cache of another moment; bench runs one
# thread a node.
taskset -c "$HEAD_CPU" "$TESSERA" plan --no-probe-cache -m "$MODEL" --key-file "$TESSERA_NET_KEY" --workers "$TESSERA_NET_WORKERS" --wire-type "$WIRE" \
  -p "$PROMPT" -n "$GEN" --json >"$out/plan.json" 2>"$out/plan.log" || true
bench=(bench -m "$MODEL" -t 1 -p "$PROMPT" -n "$GEN" --no-plan -o json "${EXTRA[@]}")
# The single-node and pipeline layouts as the plan has them (its pipeline's own split; the worker alone by range).
splits=$(python3 - "$out/plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
rows = {s["kind"]: s for s in plan["strategies"] if s.get("stages")}
last = plan["strategies"][0]["stages"][-1]["last"]
pipe = rows.get("pipeline")
print(f"0-{last}@w1")
print(",".join(f"{s['first']}-{s['last']}@{s['node']}" for s in pipe["stages"]) if pipe else f"0-{last // 2}@local,{last // 2 + 1}-{last}@w1")
PY
)
w1_split=$(echo "$splits" | sed -n 1p)
pipe_split=$(echo "$splits" | sed -n 2p)
cluster=(--workers "$TESSERA_NET_WORKERS" --key-file "$TESSERA_NET_KEY")
taskset -c "$HEAD_CPU" "$TESSERA" "${bench[@]}" >"$out/local.json" 2>"$out/local.log"
taskset -c "$HEAD_CPU" "$TESSERA" "${bench[@]}" "${cluster[@]}" --split "$w1_split" >"$out/w1.json" 2>"$out/w1.log"
taskset -c "$HEAD_CPU" "$TESSERA" "${bench[@]}" "${cluster[@]}" --split "$pipe_split" >"$out/pipeline.json" 2>"$out/pipeline.log"
taskset -c "$HEAD_CPU" "$TESSERA" "${bench[@]}" "${cluster[@]}" --tp 2 --wire-type "$WIRE" >"$out/tp.json" 2>"$out/tp.log"
INNER
)

summarize() {
  python3 - "$1" "$2" "$prompt" "$gen" <<'PY'
import json, sys
out, rtt = sys.argv[1], sys.argv[2]
def bench(name):
    try:
        rows = json.load(open(f"{out}/{name}.json"))
    except Exception as e:
        return None, None
    pp = next((r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0), None)
    tg = next((r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0), None)
    return pp, tg
try:
    plan = json.load(open(f"{out}/plan.json"))
except Exception:
    plan = {"strategies": [], "chosen": None}
kinds = {"local": "local", "w1": "single", "pipeline": "pipeline", "tp": "tensor_parallel"}
pred, measured = {}, {}
for key, kind in kinds.items():
    rows = [s for s in plan["strategies"] if s["kind"] == kind and len(s["nodes"]) == (1 if key in ("local", "w1") else 2)]
    pred[key] = (rows[0]["pred_prefill_tps"], rows[0]["pred_decode_tps"], rows[0]["why"]) if rows else (None, None, "")
    measured[key] = bench(key)
chosen = plan["strategies"][plan["chosen"]]["kind"] if plan.get("chosen") is not None else "none"
if plan.get("chosen") is not None and chosen not in kinds.values():
    print(f"| {rtt} | planner's choice: {plan['strategies'][plan['chosen']]['name']} (not run) | | | | | | | chosen | |")
chosen = {v: k for k, v in kinds.items()}.get(chosen, chosen)
# The plan weighs the whole workload (the prompt, then the generated tokens): so does "fastest".
prompt, gen = int(sys.argv[3]), int(sys.argv[4])
seconds = {k: prompt / m[0] + gen / m[1] for k, m in measured.items() if m[0] and m[1]}
fastest = min(seconds, key=seconds.get, default="none")
f = lambda x: "-" if x is None else f"{x:.2f}"
r = lambda m, p: "-" if not m or not p else f"{m / p:.2f}"
for k in kinds:
    (pp_p, tg_p, _), (pp_m, tg_m) = pred[k], measured[k]
    print(f"| {rtt} | {k} | {f(pp_p)} | {f(pp_m)} | {r(pp_m, pp_p)} | {f(tg_p)} | {f(tg_m)} | {r(tg_m, tg_p)} |"
          f" {'chosen' if chosen == k else ''} | {'fastest' if fastest == k else ''} |")
links = plan.get("links", [])
if links:
    l = links[0]
    print(f"\nmeasured link {l['between'][0]} <-> {l['between'][1]}: {l['rtt_s'] * 1e3:.3f} ms RTT, "
          f"{l['gbit_per_s']:.2f} Gbit/s; tp 2 row: {pred['tp'][2]}\n")
PY
}

echo "| RTT ms | layout | prefill pred t/s | prefill meas t/s | meas/pred | decode pred t/s | decode meas t/s | meas/pred | planner | measured |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rtt in $rtts; do
  delay=$(python3 -c "print($rtt / 2)")  # the relay adds this each way in front of the worker
  work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-tp.XXXXXX")
  OUT_DIR="$work" MODEL="$model" TESSERA="$tessera" HEAD_CPU="$head_cpu" WIRE="$wire" PROMPT="$prompt" GEN="$gen" \
    EXTRA="${extra[*]}" bash "$root/tests/netns/netns_cluster.sh" --bin-dir "$build" --workers 1 \
    --cpus "$worker_cpu" --threads 1 --rate "$rate" --delay-ms "$delay" \
    --worker-arg --models --worker-arg "$(dirname "$model")" -- \
    bash -c 'EXTRA=($EXTRA); export EXTRA; eval "$0"' "$inner" >"$work/harness.log" 2>&1 ||
    echo "tp_scenarios: RTT $rtt ms: the run failed; logs in $work" >&2
  summarize "$work" "$rtt"
done
