#!/usr/bin/env bash
# Runs a command inside a throw-away one-node Slurm cluster (munged, slurmctld, slurmd of Debian's slurm-wlm) whose
# config, keys, state and logs live in a temp dir: `slurm_cluster.sh PROGRAM ARGS...` exports SLURM_CONF for it,
# so srun/sinfo reach this cluster and nothing system-wide is read or written. Every daemon runs in the foreground
# as a child of this script and is stopped on any exit (trap), so a failing or killed test leaves none behind.
# Exit 77 (CTest's skip code for this test) only when the Slurm or munge programs are not installed.
set -uo pipefail

missing=()
for p in munged slurmctld slurmd srun sinfo; do
  command -v "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "slurm_cluster: skipped: ${missing[*]} not installed (scripts/setup.sh installs slurmd slurmctld slurm-client munge)"
  exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
  # slurmd starts every task as its user (setuid): only root can run the node daemon.
  echo "slurm_cluster: skipped: slurmd needs root"
  exit 77
fi

dir=$(mktemp -d /tmp/tessera-slurm.XXXXXX)
pids=()
conf="$dir/slurm.conf"
# What this script started: munged, and every process whose environment holds this cluster's SLURM_CONF (the
# daemons, slurmstepd, the test, srun and the ranks: all started after it was exported). Builtins only, so that
# the scan itself (and this shell, whose /proc environ predates the export) is never one of them.
started() {
  local p var state
  for p in "${pids[@]}"; do  # alive: a zombie (ended, not yet reaped) is not
    state=Z
    read -r _ _ state _ 2>/dev/null <"/proc/$p/stat"
    [ "$state" != Z ] && echo "$p"
  done
  for p in /proc/[0-9]*; do
    while IFS= read -r -d '' var; do
      if [ "$var" = "SLURM_CONF=$conf" ]; then
        echo "${p#/proc/}"
        break
      fi
    done 2>/dev/null <"$p/environ"
  done
}
stop() {
  local code=$? pid left
  trap '' PIPE  # a reader of our output may be gone already (killed with us): keep stopping
  for pid in $(started); do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do  # up to 5 s for a clean stop, then SIGKILL
    left=$(started)
    [ -z "$left" ] && break
    sleep 0.1
  done
  for pid in $(started); do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  if [ "$code" -ne 0 ] && [ "$code" -ne 77 ]; then
    for log in "$dir"/log/*; do echo "---- $log"; tail -n 20 "$log"; done
  fi
  rm -rf "$dir"
  exit "$code"
}
trap stop EXIT
trap 'exit 143' TERM INT HUP

# munged refuses a key readable by others and a socket dir others cannot enter.
mkdir -p "$dir"/{key,run,state,spool,log}
chmod 700 "$dir/key"
chmod 755 "$dir" "$dir/run"
head -c 1024 /dev/urandom >"$dir/key/munge.key"
chmod 400 "$dir/key/munge.key"
munged -F --key-file="$dir/key/munge.key" --socket="$dir/run/munge.sock" --pid-file="$dir/run/munged.pid" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/key/munged.seed" >"$dir/log/munged.out" 2>&1 &
pids+=($!)

# Two free TCP ports (slurmctld's, slurmd's): nothing answers a connect on either.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for _ in $(seq 20); do
  ctld_port=$((20000 + RANDOM % 30000))
  port_free "$ctld_port" && port_free $((ctld_port + 1)) && break
done
node=$(hostname -s)
# The node as slurmd sees this machine (CPUs, sockets, cores, memory), so that it registers as idle.
hw=$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]* //')
export SLURM_CONF="$conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=tessera-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/run/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
# No cgroups: containers (CI, gVisor) often have none to give; process groups track the tasks.
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=2
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

for _ in $(seq 50); do [ -S "$dir/run/munge.sock" ] && break; sleep 0.1; done
slurmctld -D -i >"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D >"$dir/log/slurmd.out" 2>&1 &
pids+=($!)

# Ready when the node is idle (slurmd registered with slurmctld): about a second.
ready=0
for _ in $(seq 150); do
  if [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = "idle" ]; then
    ready=1
    break
  fi
  sleep 0.2
done
if [ "$ready" != 1 ]; then
  echo "slurm_cluster: node $node did not become idle within 30 s: $(sinfo -h -o '%t %E' 2>&1)"
  exit 1
fi

# In the background, so that a TERM from CTest runs the trap now rather than after the test.
"$@" &
pids=("$!" "${pids[@]}")
wait "${pids[0]}"
