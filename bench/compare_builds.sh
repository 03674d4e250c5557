#!/usr/bin/env bash
# Two builds of tessera side by side: the same `tessera bench` on each in turn, round after round (the order rotating),
# per ISA path and model; prints one markdown row per model, path and test with both builds' t/s (medians over the
# rounds) and the median of the per-round ratios B/A. For a change that must not move speed (a refactoring).
#
#   bash bench/compare_builds.sh --a /tmp/tessera-before --b build/src/cli/tessera --rounds 3 \
#        --isa avx2,avx512 /tmp/1b-q4_k_m.gguf /tmp/1b-q4_0.gguf
#
# BENCH_ARGS (default "-p 512 -n 64 -t 2 -r 3") goes to every bench call.
set -euo pipefail

die() { echo "compare_builds: $*" >&2; exit 2; }
a="" b="" rounds=3 isas="" models=()
while (($#)); do
  case "$1" in
    --a) a="$2"; shift 2 ;;
    --b) b="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --isa) isas="$2"; shift 2 ;;
    -*) die "unknown option '$1' (valid: --a BIN --b BIN --rounds N --isa LIST MODEL...)" ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ -x $a && -x $b ]] || die "--a and --b must name tessera binaries"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive whole number, got '$rounds'"
((${#models[@]})) || die "name at least one model file"
for m in "${models[@]}"; do [[ -f $m ]] || die "no model file '$m'"; done
command -v jq >/dev/null || die "jq is needed (scripts/setup.sh installs it)"
read -r -a bench_args <<<"${BENCH_ARGS:--p 512 -n 64 -t 2 -r 3}"
IFS=, read -r -a isa_list <<<"${isas:-default}"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in $(seq 1 "$rounds"); do
  for m in "${models[@]}"; do
    for isa in "${isa_list[@]}"; do
      order=(a b)
      ((round % 2 == 0)) && order=(b a)
      for side in "${order[@]}"; do
        bin=$a
        [[ $side == b ]] && bin=$b
        env_isa=()
        [[ $isa != default ]] && env_isa=(TESSERA_ISA="$isa")
        echo "round $round: $side $(basename "$m") $isa" >&2
        env "${env_isa[@]}" "$bin" bench -m "$m" "${bench_args[@]}" -o json >"$out/$round-$(basename "$m")-$isa-$side.json"
      done
    done
  done
done

median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
echo "| model | path | test | A t/s | B t/s | B/A (median of $rounds rounds) |"
echo "|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  for isa in "${isa_list[@]}"; do
    tests=$(jq -r '.[] | "\(.n_prompt) \(.n_gen)"' "$out/1-$(basename "$m")-$isa-a.json")
    while read -r np ng; do
      sel=".[] | select(.n_prompt == $np and .n_gen == $ng) | .avg_ts"
      name="tg$ng"
      ((np > 0)) && name="pp$np"
      ta=() tb=() ratios=()
      for round in $(seq 1 "$rounds"); do
        x=$(jq -r "$sel" "$out/$round-$(basename "$m")-$isa-a.json" | head -1)
        y=$(jq -r "$sel" "$out/$round-$(basename "$m")-$isa-b.json" | head -1)
        ta+=("$x") tb+=("$y") ratios+=("$(awk -v x="$x" -v y="$y" 'BEGIN {printf "%.3f", y / x}')")
      done
      printf '| %s | %s | %s | %.1f | %.1f | %.3f (%s) |\n' "$(basename "$m" .gguf)" "$isa" "$name" \
        "$(printf '%s\n' "${ta[@]}" | median)" "$(printf '%s\n' "${tb[@]}" | median)" \
        "$(printf '%s\n' "${ratios[@]}" | median)" "${ratios[*]}"
    done <<<"$tests"
  done
done
