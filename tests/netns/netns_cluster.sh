#!/usr/bin/env bash
# Test/benchmark cluster harness: starts real `tessera worker` processes on loopback or in network namespaces
# joined to a head namespace by tbf-shaped veth links, optionally behind a latency relay, runs one command
# against them, and always tears everything down. See docs/testing-network.md.
#
# Usage: netns_cluster.sh [options] -- COMMAND [ARGS...]
#        netns_cluster.sh --cleanup-stale
# Options:
#   --mode netns|loopback   where the workers run (default netns; netns needs root and iproute2)
#   --workers N             number of workers (default 2)
#   --rate RATE             tbf rate on every link, both directions: 1gbit, 10gbit, 500mbit, or none (default none)
#   --delay-ms MS           one-way delay a tessera-relay adds in front of each worker (default 0: no relay)
#   --cpus LIST             comma-separated CPUs the workers are pinned to, cycled (default: not pinned)
#   --threads T             threads per worker (default 1)
#   --worker-arg ARG        extra argument for every worker (repeatable)
#   --probe                 also start a netns_probe server beside each worker (behind the same relay)
#   --bin-dir DIR           the build tree (default $TESSERA_BUILD_DIR or ./build): DIR/src/cli/tessera,
#                           DIR/tools/relay/tessera-relay, DIR/tests/netns/netns_probe
#   --log-dir DIR           keep worker logs there (default: a temporary folder, removed at exit)
# The command runs in the head's namespace (netns mode) with these variables set:
#   TESSERA_NET_WORKERS   w1=HOST:PORT,w2=HOST:PORT,...   (the addresses the head should use)
#   TESSERA_NET_KEY       the cluster key file (workers always run with it, so loopback runs use TLS too)
#   TESSERA_NET_PROBES    HOST:PORT,...                    (with --probe)
#   TESSERA_NET_LOG_DIR   where worker logs are
#   TESSERA_NET_HEAD_NS   the head's namespace (empty on loopback)
# Exit status: the command's, or 3 when the cluster could not be set up.
set -euo pipefail

mode=netns
n_workers=2
rate=none
delay_ms=0
cpus=""
threads=1
worker_args=()
probe=0
bin_dir="${TESSERA_BUILD_DIR:-build}"
log_dir=""
cleanup_only=0

die() {
  echo "netns_cluster: $*" >&2
  exit 3
}

while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode="$2"; shift 2 ;;
    --workers) n_workers="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --delay-ms) delay_ms="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --worker-arg) worker_args+=("$2"); shift 2 ;;
    --probe) probe=1; shift ;;
    --bin-dir) bin_dir="$2"; shift 2 ;;
    --log-dir) log_dir="$2"; shift 2 ;;
    --cleanup-stale) cleanup_only=1; shift ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see the usage at the top of $0)" ;;
  esac
done

[[ "$mode" == netns || "$mode" == loopback ]] || die "--mode must be netns or loopback, got '$mode'"
[[ "$n_workers" =~ ^[1-9][0-9]?$ && "$n_workers" -le 50 ]] || die "--workers must be 1-50, got '$n_workers'"
[[ "$delay_ms" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--delay-ms must be a number of milliseconds, got '$delay_ms'"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'"
if [ "$cleanup_only" -eq 0 ] && [ $# -eq 0 ]; then die "no command given (usage: $0 [options] -- COMMAND ...)"; fi

# tbf wants a bucket big enough for what arrives between two timer ticks; 1 ms of traffic (at least 64 KiB)
# keeps the rate exact without letting bursts through.
tbf_burst_bytes() {
  local r="$1" n unit bits
  [[ "$r" =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] || die "--rate must look like 1gbit, 10gbit or 500mbit (or none), got '$r'"
  n="${BASH_REMATCH[1]}"
  unit="${BASH_REMATCH[2]}"
  case "$unit" in
    kbit) bits=$((n * 1000)) ;;
    mbit) bits=$((n * 1000000)) ;;
    gbit) bits=$((n * 1000000000)) ;;
  esac
  local b=$((bits / 8 / 1000))
  [ "$b" -lt 65536 ] && b=65536
  echo "$b"
}

# What runs whose harness is gone (killed with SIGKILL) left behind: processes inside their namespaces, the
# namespaces (with their veths), and on loopback the daemons listed in their folder, which carry the marker
# TESSERA_NET_RUN=<that folder> in their environment (so a pid reused by an unrelated process is never touched).
owner_alive() { [ "$1" == "$$" ] && return 1; kill -0 "$1" 2>/dev/null; }
cleanup_stale() {
  local ns owner pid dir
  if command -v ip >/dev/null 2>&1; then
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^tessera-ns-' || true); do
      owner="${ns#tessera-ns-}"
      owner="${owner%%-*}"
      owner_alive "$owner" && continue
      for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
      if ip netns del "$ns" 2>/dev/null; then echo "netns_cluster: removed stale namespace $ns" >&2; fi
    done
  fi
  for dir in "${TMPDIR:-/tmp}"/tessera-net-*; do
    if [ ! -d "$dir" ] || [ "$dir" == "${tmp_dir:-}" ]; then continue; fi
    owner="${dir##*/tessera-net-}"
    owner="${owner%%.*}"
    owner_alive "$owner" && continue
    for pid in $(cat "$dir/pids" 2>/dev/null || true); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "TESSERA_NET_RUN=$dir"; then
        kill -KILL "$pid" 2>/dev/null || true
        echo "netns_cluster: stopped process $pid left by a killed run" >&2
      fi
    done
    rm -rf "$dir"
  done
}

if [ "$cleanup_only" -eq 1 ]; then
  cleanup_stale
  exit 0
fi

tessera="$bin_dir/src/cli/tessera"
relay="$bin_dir/tools/relay/tessera-relay"
probe_bin="$bin_dir/tests/netns/netns_probe"
[ -x "$tessera" ] || die "no tessera binary at $tessera (build it, or pass --bin-dir)"
if awk "BEGIN{exit !($delay_ms > 0)}"; then use_relay=1; else use_relay=0; fi
[ "$use_relay" -eq 0 ] || [ -x "$relay" ] || die "no tessera-relay at $relay (ninja tessera-relay)"
[ "$probe" -eq 0 ] || [ -x "$probe_bin" ] || die "no netns_probe at $probe_bin (ninja netns_probe)"

if [ "$mode" == netns ]; then
  [ "$(id -u)" -eq 0 ] || die "network namespaces need root (run as root, or use --mode loopback)"
  command -v ip >/dev/null 2>&1 || die "'ip' (iproute2) is missing: run scripts/setup.sh"
  command -v tc >/dev/null 2>&1 || die "'tc' (iproute2) is missing: run scripts/setup.sh"
else
  [ "$rate" == none ] || die "--rate shapes veth links and needs --mode netns"
fi
if [ "$rate" != none ]; then burst=$(tbf_burst_bytes "$rate"); fi
cpu_list=()
if [ -n "$cpus" ]; then
  IFS=, read -r -a cpu_list <<<"$cpus"
  command -v taskset >/dev/null 2>&1 || die "'taskset' (util-linux) is missing"
fi

# ---- state the cleanup needs; everything created is recorded here first -------------------------------------
run_id=$$
namespaces=()
pids=()
cmd_pid=""
tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/tessera-net-$run_id.XXXXXX")
[ -n "$log_dir" ] || log_dir="$tmp_dir/logs"
mkdir -p "$log_dir"

# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  set +e
  # Every process started here leads its own process group (setsid), so signalling -PID also reaches anything
  # it started (the command's tessera runs, for one).
  local p alive
  for p in $cmd_pid "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  # Workers stop within a second or two; whatever is still there after 5 s is killed.
  for _ in $(seq 50); do
    alive=0
    for p in $cmd_pid "${pids[@]}"; do kill -0 -- "-$p" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  for p in $cmd_pid "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  for p in $cmd_pid "${pids[@]}"; do { wait "$p"; } 2>/dev/null; done
  local ns
  for ns in "${namespaces[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null || echo "netns_cluster: could not delete namespace $ns" >&2
  done
  rm -rf "$tmp_dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# launch NS CPU CMD...: the argv that runs CMD in namespace NS (here, on loopback), pinned to CPU when given, as
# the leader of a new process group, marked for cleanup_stale. setsid, env, ip netns exec, taskset and chrt all
# exec, so the pid bash reports for `"${launched[@]}" &` is CMD's own.
launch() {
  local ns="$1" cpu="$2"
  shift 2
  launched=(setsid env "TESSERA_NET_RUN=$tmp_dir")
  [ -z "$ns" ] || launched+=(ip netns exec "$ns")
  [ -z "$cpu" ] || launched+=(taskset -c "$cpu")
  launched+=("$@")
}

# start_daemon NAME NS CPU CMD...: starts a daemon that prints "listening on HOST:PORT" first; sets $started_addr.
start_daemon() {
  local name="$1" ns="$2" cpu="$3"
  shift 3
  launch "$ns" "$cpu" "$@"
  "${launched[@]}" >"$log_dir/$name.out" 2>"$log_dir/$name.err" &
  local pid=$!
  pids+=("$pid")
  echo "$pid" >>"$tmp_dir/pids"
  local line=""
  for _ in $(seq 300); do
    line=$(head -n1 "$log_dir/$name.out" 2>/dev/null || true)
    [[ "$line" == "listening on "* ]] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      die "$name exited before listening: $(tail -n 5 "$log_dir/$name.err")"
    fi
    sleep 0.05
  done
  [[ "$line" == "listening on "* ]] || die "$name did not listen within 15 s: $(tail -n 5 "$log_dir/$name.err")"
  started_addr="${line#listening on }"
}

cleanup_stale

# Relays play the network, which should not queue behind the nodes' threads for a CPU: with SCHED_FIFO their
# timed wake-ups land within tens of microseconds even on a loaded machine (a plain thread's can slip by a few
# scheduler ticks). Without the privilege they run as ordinary processes.
relay_rt=()
if chrt -f 1 true 2>/dev/null; then relay_rt=(chrt -f 1); fi

key="$tmp_dir/cluster.key"
"$tessera" keygen -o "$key" >/dev/null 2>"$log_dir/keygen.err" || die "tessera keygen failed: $(cat "$log_dir/keygen.err")"

head_ns=""
if [ "$mode" == netns ]; then
  head_ns="tessera-ns-$run_id-0"
  namespaces+=("$head_ns")
  ip netns add "$head_ns" || die "ip netns add $head_ns failed (network namespaces unavailable?)"
  ip -n "$head_ns" link set lo up
  # The head's namespace routes between the workers (a switch in one box): workers of a tensor-parallel group
  # talk to each other directly, through two shaped veths, as two machines on one switch would.
  ip netns exec "$head_ns" sysctl -qw net.ipv4.ip_forward=1 || die "cannot enable forwarding in $head_ns"
fi

workers=()
probes=()
for i in $(seq 1 "$n_workers"); do
  cpu=""
  if [ ${#cpu_list[@]} -gt 0 ]; then cpu="${cpu_list[$(((i - 1) % ${#cpu_list[@]}))]}"; fi
  ns=""
  if [ "$mode" == netns ]; then
    ns="tessera-ns-$run_id-$i"
    namespaces+=("$ns")
    ip netns add "$ns" || die "ip netns add $ns failed"
    ip -n "$ns" link set lo up
    # One veth pair per worker, created straight into the two namespaces (names are per namespace).
    ip link add "veth$i" netns "$head_ns" type veth peer name veth0 netns "$ns" || die "cannot create a veth pair"
    ip -n "$head_ns" addr add "10.77.$i.1/24" dev "veth$i"
    ip -n "$ns" addr add "10.77.$i.2/24" dev veth0
    ip -n "$head_ns" link set "veth$i" up
    ip -n "$ns" link set veth0 up
    ip -n "$ns" route add 10.77.0.0/16 via "10.77.$i.1" dev veth0 || die "cannot route $ns to the other workers"
    if [ "$rate" != none ]; then
      # Shaped both ways: each side's egress.
      ip netns exec "$head_ns" tc qdisc add dev "veth$i" root tbf rate "$rate" burst "$burst" latency 50ms ||
        die "tc tbf on veth$i failed"
      ip netns exec "$ns" tc qdisc add dev veth0 root tbf rate "$rate" burst "$burst" latency 50ms ||
        die "tc tbf on veth0 in $ns failed"
    fi
    host="10.77.$i.2"
    worker_listen="$host:50052"
    probe_listen="$host:50054"
  else
    host="127.0.0.1"
    worker_listen="$host:0"
    probe_listen="$host:0"
  fi
  start_daemon "w$i" "$ns" "$cpu" "$tessera" worker --listen "$worker_listen" --name "w$i" --key-file "$key" \
    -t "$threads" ${worker_args[@]+"${worker_args[@]}"}
  worker_addr="$started_addr"
  if [ "$probe" -eq 1 ]; then
    start_daemon "probe$i" "$ns" "" "$probe_bin" serve --listen "$probe_listen"
    probe_addr="$started_addr"
  fi
  if [ "$use_relay" -eq 1 ]; then
    # The relay sits beside its worker, so the shaped link and the delay add up as on a real network.
    relay_listen="$host:$([ "$mode" == netns ] && echo 50053 || echo 0)"
    start_daemon "relay$i" "$ns" "" ${relay_rt[@]+"${relay_rt[@]}"} "$relay" --listen "$relay_listen" --to "$worker_addr" --delay-ms "$delay_ms" -q
    worker_addr="$started_addr"
    if [ "$probe" -eq 1 ]; then
      relay_listen="$host:$([ "$mode" == netns ] && echo 50055 || echo 0)"
      start_daemon "probe-relay$i" "$ns" "" ${relay_rt[@]+"${relay_rt[@]}"} "$relay" --listen "$relay_listen" --to "$probe_addr" \
        --delay-ms "$delay_ms" -q
      probe_addr="$started_addr"
    fi
  fi
  workers+=("w$i=$worker_addr")
  [ "$probe" -eq 1 ] && probes+=("$probe_addr")
done

join_by_comma() {
  local IFS=,
  echo "$*"
}
export TESSERA_NET_WORKERS
TESSERA_NET_WORKERS=$(join_by_comma "${workers[@]}")
export TESSERA_NET_KEY="$key"
export TESSERA_NET_PROBES
TESSERA_NET_PROBES=$(join_by_comma ${probes[@]+"${probes[@]}"})
export TESSERA_NET_LOG_DIR="$log_dir"
export TESSERA_NET_HEAD_NS="$head_ns"
echo "netns_cluster: $mode, $n_workers workers ($TESSERA_NET_WORKERS), rate $rate, delay ${delay_ms} ms each way" >&2

# The command runs in the background so a TERM (a CTest timeout) reaches the trap at once.
set +e
launch "$head_ns" "" "$@"
"${launched[@]}" <&0 &  # explicit stdin: a background job would otherwise read /dev/null
cmd_pid=$!
echo "$cmd_pid" >>"$tmp_dir/pids"
wait "$cmd_pid"
status=$?
cmd_pid=""
set -e
if [ "$status" -ne 0 ]; then
  for f in "$log_dir"/*.err; do
    if [ -s "$f" ]; then
      echo "---- $(basename "$f") (last lines) ----" >&2
      tail -n 20 "$f" >&2
    fi
  done
fi
exit "$status"
