#!/usr/bin/env bash
# tessera-relay on loopback: bad arguments are clear errors, the round trip through it is 2 x delay plus little,
# bulk transfers still flow, an unreachable target closes the client, and SIGTERM stops it cleanly.
# Usage: relay_test.sh BUILD_DIR
set -euo pipefail
bin_dir="$1"
relay="$bin_dir/tools/relay/tessera-relay"
probe="$bin_dir/tests/netns/netns_probe"
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-relay-test.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill -KILL "$p" 2>/dev/null || true
    { wait "$p"; } 2>/dev/null || true  # quiet: no "Killed" job notice
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_error "TEXT" ARGS...: the relay must exit non-zero and say TEXT on stderr.
expect_error() {
  local text="$1"
  shift
  if "$relay" "$@" >"$work/out" 2>"$work/err"; then fail "tessera-relay $* succeeded"; fi
  grep -qF -- "$text" "$work/err" || fail "tessera-relay $*: expected '$text' in: $(cat "$work/err")"
  echo "ok: tessera-relay $* -> $(head -n1 "$work/err")"
}
expect_error "--listen is required" --to 127.0.0.1:1 --delay-ms 1
expect_error "--delay-ms is required" --listen 127.0.0.1:0 --to 127.0.0.1:1
expect_error "is not HOST:PORT" --listen nonsense --to 127.0.0.1:1 --delay-ms 1
expect_error "is not a port" --listen 127.0.0.1:99999 --to 127.0.0.1:1 --delay-ms 1
expect_error "outside [0, 60000]" --listen 127.0.0.1:0 --to 127.0.0.1:1 --delay-ms -3
expect_error "cannot resolve" --listen 127.0.0.1:0 --to no-such-host.invalid:1 --delay-ms 1

# start NAME CMD...: a daemon that prints "listening on HOST:PORT"; sets $addr.
start() {
  local name="$1"
  shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=("$!")
  last_pid=$!
  for _ in $(seq 200); do
    addr=$(sed -n 's/^listening on //p' "$work/$name.out" 2>/dev/null | head -n1)
    [ -n "$addr" ] && return 0
    kill -0 "$last_pid" 2>/dev/null || fail "$name exited: $(cat "$work/$name.err")"
    sleep 0.05
  done
  fail "$name did not start"
}

start server "$probe" serve --listen 127.0.0.1:0
server="$addr"
start busy "$relay" --listen 127.0.0.1:0 --to "$server" --delay-ms 0 -q
expect_error "cannot bind" --listen "$addr" --to "$server" --delay-ms 1

direct=$("$probe" measure --to "$server" --bytes 33554432)
echo "direct: $direct"
# As in the harness: SCHED_FIFO where allowed, so timed wake-ups do not wait for a busy CPU.
rt=()
if chrt -f 1 true 2>/dev/null; then rt=(chrt -f 1); fi
start relay ${rt[@]+"${rt[@]}"} "$relay" --listen 127.0.0.1:0 --to "$server" --delay-ms 5
relay_pid=$last_pid
through=$("$probe" measure --to "$addr" --bytes 33554432)
echo "through a 5 ms relay: $through"
[[ "$through" =~ rtt_ms=([0-9.]+)\ up_gbit=([0-9.]+)\ down_gbit=([0-9.]+) ]] || fail "unexpected probe output"
rtt="${BASH_REMATCH[1]}"
up="${BASH_REMATCH[2]}"
down="${BASH_REMATCH[3]}"
# 2 x 5 ms plus loopback and two thread wake-ups: a loaded 2-core machine may add a few ms, never less than 10.
awk -v r="$rtt" 'BEGIN { exit !(r >= 10 && r <= 14) }' || fail "RTT through the relay $rtt ms is outside [10, 14]"
awk -v u="$up" -v d="$down" 'BEGIN { exit !(u >= 0.5 && d >= 0.5) }' ||
  fail "bulk transfer through the relay is too slow (up $up, down $down Gbit/s; expected >= 0.5)"

# An unreachable target: the client's connection is closed, the relay stays up and says why.
start dead "$relay" --listen 127.0.0.1:0 --to 127.0.0.1:1 --delay-ms 1
if "$probe" measure --to "$addr" >/dev/null 2>"$work/dead-probe.err"; then fail "a relay to a closed port relayed"; fi
sleep 0.2
grep -q "cannot connect to 127.0.0.1:1" "$work/dead.err" || fail "the relay did not report the unreachable target"
echo "ok: unreachable target -> $(grep -m1 'cannot connect' "$work/dead.err")"

# SIGTERM stops it cleanly (exit 0) within a second.
kill -TERM "$relay_pid"
for _ in $(seq 20); do kill -0 "$relay_pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$relay_pid" 2>/dev/null; then fail "the relay did not stop within a second of SIGTERM"; fi
set +e
wait "$relay_pid"
status=$?
set -e
[ "$status" -eq 0 ] || fail "the relay exited with $status after SIGTERM"
echo "ok: SIGTERM -> exit 0"
echo "PASS"
