#!/usr/bin/env bash
# The checks a network-cluster test runs inside netns_cluster.sh: greedy output over the workers equals the
# single-node output for each model, and the link's measured RTT and bandwidth fall in the expected ranges
# (from netns_probe, and from the figures tessera's head prints at connect).
#
# Usage: check_run.sh --tessera BIN [[--wire-type T] --model M]... [-n TOKENS] [--probe BIN]
#                     [--rtt-ms MIN MAX] [--gbit MIN MAX] [--head-links]
#   --wire-type         activations on the wire for the models named after it (default: tessera's, f16); f32
#                       gives identical logits, which random-weight fixtures need for equal greedy tokens
#   --rtt-ms / --gbit   ranges every probed link (and, with --head-links, every link the head reports) must meet
#   --head-links        also require the head's own link figures ("rtt X ms, up R, down R" per worker) from the run
#   --plan-links        the same from `tessera plan --workers` (its live probe measures each link), first model,
#                       and each pair of workers' own link (at least --rtt-ms's minimum, at most --gbit's maximum)
#   --tbf-rate TEXT     every veth in the head's namespace must carry a tbf qdisc of this rate ("10Gbit")
#   --head-arg ARG      an extra argument for the run over the workers (repeatable), e.g. --tp 3
set -euo pipefail

tessera=""
models=()
wires=()
wire=""
n_predict=32
probe=""
rtt_min=""
rtt_max=""
gbit_min=""
gbit_max=""
head_links=0
plan_links=0
tbf_rate=""
head_args=()
prompt="Once upon a time"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case "$1" in
    --tessera) tessera="$2"; shift 2 ;;
    --model) models+=("$2"); wires+=("$wire"); shift 2 ;;
    --wire-type) wire="$2"; shift 2 ;;
    -n) n_predict="$2"; shift 2 ;;
    --probe) probe="$2"; shift 2 ;;
    --rtt-ms) rtt_min="$2"; rtt_max="$3"; shift 3 ;;
    --gbit) gbit_min="$2"; gbit_max="$3"; shift 3 ;;
    --head-links) head_links=1; shift ;;
    --plan-links) plan_links=1; shift ;;
    --tbf-rate) tbf_rate="$2"; shift 2 ;;
    --head-arg) head_args+=("$2"); shift 2 ;;
    *) fail "check_run.sh: unknown option '$1'" ;;
  esac
done
[ -x "$tessera" ] || fail "no tessera binary at '$tessera'"
[ -n "${TESSERA_NET_WORKERS:-}" ] || fail "TESSERA_NET_WORKERS is not set: run this under netns_cluster.sh"
[ ${#models[@]} -gt 0 ] || fail "no --model given"

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# in_range VALUE MIN MAX: true when MIN <= VALUE <= MAX (decimals allowed).
in_range() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; }

check_rtt_gbit() {
  local what="$1" rtt="$2" up="$3" down="$4"
  echo "$what: rtt ${rtt} ms, up ${up} Gbit/s, down ${down} Gbit/s"
  if [ -n "$rtt_min" ]; then
    in_range "$rtt" "$rtt_min" "$rtt_max" || fail "$what: RTT $rtt ms is outside [$rtt_min, $rtt_max] ms"
  fi
  if [ -n "$gbit_min" ]; then
    in_range "$up" "$gbit_min" "$gbit_max" || fail "$what: upload $up Gbit/s is outside [$gbit_min, $gbit_max]"
    in_range "$down" "$gbit_min" "$gbit_max" || fail "$what: download $down Gbit/s is outside [$gbit_min, $gbit_max]"
  fi
}

# 0. The shaping is in place (a rate the machine cannot exceed anyway, like 10 Gbit here, shows only here).
if [ -n "$tbf_rate" ]; then
  devs=$(ip -o link show | awk -F': ' '{ print $2 }' | cut -d@ -f1 | grep '^veth' || true)
  [ -n "$devs" ] || fail "no veth links in this namespace: run under netns_cluster.sh --mode netns"
  for dev in $devs; do
    qdisc=$(tc qdisc show dev "$dev")
    [[ "$qdisc" == *"tbf"*"rate $tbf_rate "* ]] || fail "$dev is not shaped by tbf at $tbf_rate: $qdisc"
    echo "$dev: $qdisc"
  done
fi

# 1. The links themselves, measured by netns_probe (independent of tessera).
if [ -n "$probe" ]; then
  [ -n "${TESSERA_NET_PROBES:-}" ] || fail "--probe given but the harness started no probes (netns_cluster.sh --probe)"
  IFS=, read -r -a probe_addrs <<<"$TESSERA_NET_PROBES"
  for addr in "${probe_addrs[@]}"; do
    line=$("$probe" measure --to "$addr") || fail "netns_probe measure --to $addr failed"
    [[ "$line" =~ rtt_ms=([0-9.]+)\ up_gbit=([0-9.]+)\ down_gbit=([0-9.]+) ]] || fail "unexpected probe output: $line"
    check_rtt_gbit "probe $addr" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"
  done
fi

# Converts tessera's rate text ("1.9 GB/s", "118.2 MB/s", "900 kB/s") to Gbit/s.
to_gbit() {
  awk -v n="$1" -v u="$2" 'BEGIN { m = (u == "GB/s") ? 8 : (u == "MB/s") ? 8e-3 : (u == "kB/s") ? 8e-6 : -1;
                                    if (m < 0) exit 1; printf "%.3f", n * m }'
}

# check_head_links WHAT FILE: every worker has a line naming it with the head's figures for its link, as
# net::describe(LinkMeasurement) formats them ("... w1 ... rtt X ms, up R U, down R U"), within the ranges.
check_head_links() {
  local what="$1" file="$2" entry w line up down
  IFS=, read -r -a entries <<<"$TESSERA_NET_WORKERS"
  for entry in "${entries[@]}"; do
    w="${entry%%=*}"
    line=$(grep -E "\b$w\b.*rtt [0-9.]+ ms, up [0-9.]+ [kMG]B/s, down [0-9.]+ [kMG]B/s" "$file" | head -n1 || true)
    if [ -z "$line" ]; then
      echo "---- output of $what ----" >&2
      cat "$file" >&2
      fail "$what printed no link figures for worker $w (expected a line naming it with 'rtt X ms, up R, down R'" \
        "as net::describe(LinkMeasurement) formats them)"
    fi
    [[ "$line" =~ rtt\ ([0-9.]+)\ ms,\ up\ ([0-9.]+)\ ([kMG]B/s),\ down\ ([0-9.]+)\ ([kMG]B/s) ]]
    up=$(to_gbit "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}")
    down=$(to_gbit "${BASH_REMATCH[4]}" "${BASH_REMATCH[5]}")
    check_rtt_gbit "$what: head's link to $w" "${BASH_REMATCH[1]}" "$up" "$down"
  done
}

# 2. Greedy output over the workers equals the single-node output, for every model.
for m in "${!models[@]}"; do
  model="${models[$m]}"
  [ -f "$model" ] || fail "model $model is missing"
  name=$(basename "$model")
  wire_args=()
  [ -z "${wires[$m]}" ] || wire_args=(--wire-type "${wires[$m]}")
  "$tessera" run -m "$model" -p "$prompt" -n "$n_predict" --temp 0 -t 1 >"$work/one.out" 2>"$work/one.err" ||
    fail "$name: single-node run failed: $(tail -n 5 "$work/one.err")"
  start=$(date +%s.%N)
  "$tessera" run -m "$model" -p "$prompt" -n "$n_predict" --temp 0 -t 1 --workers "$TESSERA_NET_WORKERS" \
    --key-file "$TESSERA_NET_KEY" ${wire_args[@]+"${wire_args[@]}"} ${head_args[@]+"${head_args[@]}"} \
    >"$work/dist.out" 2>"$work/dist.err" ||
    fail "$name: run over $TESSERA_NET_WORKERS failed: $(tail -n 10 "$work/dist.err")"
  end=$(date +%s.%N)
  [ -s "$work/one.out" ] || fail "$name: the single-node run printed nothing"
  if ! cmp -s "$work/one.out" "$work/dist.out"; then
    echo "single node:" >&2
    cat "$work/one.out" >&2
    echo "over the workers:" >&2
    cat "$work/dist.out" >&2
    fail "$name: output over the workers differs from the single-node output"
  fi
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  echo "$name: same $n_predict greedy tokens (wire ${wires[$m]:-default}) over $TESSERA_NET_WORKERS ($seconds s)"

  # 3. The head's own link figures, as the run printed them.
  [ "$head_links" -eq 0 ] || check_head_links "$name: the run" "$work/dist.err"
done

# 4. The planner's live probe of the same links.
if [ "$plan_links" -eq 1 ]; then
  "$tessera" plan -m "${models[0]}" --workers "$TESSERA_NET_WORKERS" --key-file "$TESSERA_NET_KEY" \
    --probe-seconds 0.05 >"$work/plan.txt" 2>&1 || fail "tessera plan --workers failed: $(tail -n 10 "$work/plan.txt")"
  check_head_links "tessera plan" "$work/plan.txt"
  # Each pair of workers measured its own link (the one a group's collectives take): through the head's namespace
  # and the dialled worker's relay, at least one link's RTT and at most one link's rate.
  IFS=, read -r -a entries <<<"$TESSERA_NET_WORKERS"
  for ((i = 0; i < ${#entries[@]}; i++)); do
    for ((k = i + 1; k < ${#entries[@]}; k++)); do
      a="${entries[$i]%%=*}"
      b="${entries[$k]%%=*}"
      line=$(grep -E "\b$a <-> $b direct \(tensor/expert-parallel groups\): [0-9.e+-]+ Gbit/s, [0-9.e+-]+ ms RTT" \
        "$work/plan.txt" | head -n1 || true)
      [ -n "$line" ] || fail "tessera plan printed no direct link figures for $a <-> $b: $(grep -n '<->' "$work/plan.txt")"
      [[ "$line" =~ :\ ([0-9.e+-]+)\ Gbit/s,\ ([0-9.e+-]+)\ ms\ RTT ]]
      echo "tessera plan: $a <-> $b direct: rtt ${BASH_REMATCH[2]} ms, ${BASH_REMATCH[1]} Gbit/s"
      if [ -n "$rtt_min" ]; then
        in_range "${BASH_REMATCH[2]}" "$rtt_min" 1e9 || fail "$a <-> $b: RTT ${BASH_REMATCH[2]} ms is below $rtt_min ms"
      fi
      if [ -n "$gbit_max" ]; then
        in_range "${BASH_REMATCH[1]}" 0 "$gbit_max" || fail "$a <-> $b: ${BASH_REMATCH[1]} Gbit/s is above $gbit_max"
      fi
    done
  done
fi
echo "PASS"
