#!/bin/bash
# The measurements of docs/parallel.md, "Machines with their own memory": each rank of 1b --tp 3 and of moe-small
# --ep 3 and --tp 3 --ep 3 timed alone (bench --shard-alone), the whole model on one core, in three alternating
# rounds with the load before each; then an mpirun group's sweep and counts, and the planner's rows for the three
# VMs of examples/clusters/three-vms-10g.json. Prints each rank's median over the rounds.
# Usage: bench/run_shard_alone.sh [OUT_DIR]   (TESSERA, MODEL_1B, MODEL_MOE override the paths)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${TESSERA:-build/src/cli/tessera}
M1=${MODEL_1B:-/tmp/1b-q4_k_m.gguf}
MM=${MODEL_MOE:-/tmp/moe-small-q4_k_m.gguf}
C=examples/clusters/three-vms-10g.json
O=${1:-/tmp/shard-alone}
mkdir -p "$O"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
for rep in 1 2 3; do
  for job in 1b-tp3 1b-one moe-ep3 moe-tpep3 moe-one; do
    echo "$rep $job $(date -u +%T) $(uptime)" >> "$O/load.txt"
    case $job in
      1b-tp3) $T bench -m "$M1" -p 0 -n 64 -r 3 -t 1 --tp 3 --shard-alone --plan-cluster $C -o json ;;
      1b-one) $T bench -m "$M1" -p 0 -n 64 -r 3 -t 1 -o json ;;
      moe-ep3) $T bench -m "$MM" -p 0 -n 64 -r 3 -t 1 --ep 3 --shard-alone --plan-cluster $C -o json ;;
      moe-tpep3) $T bench -m "$MM" -p 0 -n 64 -r 3 -t 1 --tp 3 --ep 3 --shard-alone --plan-cluster $C -o json ;;
      moe-one) $T bench -m "$MM" -p 0 -n 64 -r 3 -t 1 -o json ;;
    esac > "$O/$job-$rep.json" 2> "$O/$job-$rep.err"
  done
done
echo "mpi $(date -u +%T) $(uptime)" >> "$O/load.txt"
mpirun --oversubscribe -np 3 $T bench -m "$M1" -p 0 -n 16 -r 2 -t 1 --tp 3 --no-plan -o json \
  > "$O/mpi-1b-tp3.json" 2> "$O/mpi-1b-tp3.err"
mpirun --oversubscribe -np 3 $T bench -m "$MM" -p 0 -n 16 -r 2 -t 1 --ep 3 --no-plan -o json \
  > "$O/mpi-moe-ep3.json" 2> "$O/mpi-moe-ep3.err"
$T plan --cluster $C -m "$M1" -p 1 -n 64 > "$O/plan-1b.txt" 2>&1
$T plan --cluster $C -m "$MM" -p 1 -n 64 > "$O/plan-moe.txt" 2>&1
echo "done $(date -u +%T) $(uptime)" >> "$O/load.txt"
python3 - "$O" <<'PY'
import json, statistics, sys
d = sys.argv[1]
for job in ["1b-tp3", "moe-ep3", "moe-tpep3"]:
    per = {}
    for rep in (1, 2, 3):
        for r in json.load(open(f"{d}/{job}-{rep}.json")):
            s = r["shard_alone"]
            per.setdefault(s["rank"], []).append((1e3 / r["avg_ts"], s["predicted_shard_s"] * 1e3, s["read_gbps"], r))
    for rank, v in sorted(per.items()):
        r = v[0][3]
        print(f"{job} rank {rank}: measured ms {[round(x[0], 2) for x in v]} median {statistics.median(x[0] for x in v):.2f};"
              f" predicted ms {[round(x[1], 2) for x in v]} at GB/s {[round(x[2], 1) for x in v]};"
              f" weights {r['shard_alone']['weight_bytes'] / 2**20:.1f} MiB, read {r['shard_alone']['read_bytes_per_token'] / 1e6:.1f} MB/token,"
              f" {r['collectives_per_token']} collectives and {r['collective_bytes_per_token']:.0f} B per token")
for job in ["1b-one", "moe-one"]:
    v = [1e3 / json.load(open(f"{d}/{job}-{rep}.json"))[0]["avg_ts"] for rep in (1, 2, 3)]
    print(f"{job}: ms {[round(x, 2) for x in v]} median {statistics.median(v):.2f}")
for job in ["mpi-1b-tp3", "mpi-moe-ep3"]:
    for r in json.load(open(f"{d}/{job}.json")):
        print(f"{job} rank 0: {1e3 / r['avg_ts']:.2f} ms per token, {r['collectives_per_token']} collectives and"
              f" {r['collective_bytes_per_token']:.0f} B per token")
PY
grep -h "collectives: all-reduce" "$O"/mpi-*.err
