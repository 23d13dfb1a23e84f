#!/usr/bin/env bash
# A throwaway Slurm on this machine: one slurmctld and two slurmd "nodes" (n1, n2), with every
# file (config, state, spool, logs, pids) under DIR. For tests of `srun --mpi=pmi2` across
# nodes (weft-cli/tests/slurm.rs). Needs root and Debian's slurm-wlm (scripts/install-slurm.sh).
#
#   scripts/slurm-local.sh start DIR   # writes DIR/slurm.conf, starts the daemons, waits until
#                                      # `sinfo` shows both nodes idle; prints SLURM_CONF=...
#   scripts/slurm-local.sh stop DIR    # cancels jobs, stops the daemons by their PIDs
#
# Then: SLURM_CONF=DIR/slurm.conf srun -N 2 -n 4 --mpi=pmi2 ./prog
# Ports: slurmctld 6817, slurmd n1 6818, n2 6819 (override with WEFT_SLURM_PORT_BASE=P: P, P+1,
# P+2). Exit codes: 0 ok, 1 failure (the daemons' logs are printed), 2 usage.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2
base=${WEFT_SLURM_PORT_BASE:-6817}
conf=$dir/slurm.conf
export SLURM_CONF=$conf

log() { echo "slurm-local: $*" >&2; }

show_logs() {
  for f in "$dir"/slurmctld.log "$dir"/slurmd-n1.log "$dir"/slurmd-n2.log; do
    [ -f "$f" ] && { echo "--- $f (last 20 lines)" >&2; tail -n 20 "$f" >&2; }
  done
  return 0
}

# Stops the daemon whose PID is in file $1: TERM, then KILL if it is still there after ~10 s.
stop_pid() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  rm -f "$f"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  log "pid $pid ignored SIGTERM; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  [ -d "$dir" ] || return 0
  if [ -f "$dir/ctld.pid" ] && command -v scancel >/dev/null; then
    # Jobs first, so no slurmstepd (which outlives slurmd) is left running.
    local ids
    ids=$(timeout 5 squeue -h -o %i 2>/dev/null || true)
    # shellcheck disable=SC2086 # one word per job id
    [ -z "$ids" ] || timeout 10 scancel --quiet --full $ids 2>/dev/null || true
    for _ in $(seq 100); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.1
    done
  fi
  stop_pid "$dir/slurmd-n1.pid.ours"
  stop_pid "$dir/slurmd-n2.pid.ours"
  stop_pid "$dir/ctld.pid"
  return 0
}

write_conf() {
  local host
  host=$(hostname)
  mkdir -p "$dir/state" "$dir/spool-n1" "$dir/spool-n2" "$dir/tmp-n1" "$dir/tmp-n2"
  cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh: two nodes on one host, everything under $dir.
ClusterName=weftlocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
TmpFS=$dir/tmp-%n
InactiveLimit=0
KillWait=5
MinJobAge=10
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + 1)) CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + 2)) CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  if [ "$(id -u)" != 0 ]; then log "needs root (slurmd runs jobs as any user)"; exit 1; fi
  for p in slurmctld slurmd sinfo srun; do
    command -v $p >/dev/null || { log "$p not found (scripts/install-slurm.sh installs slurm-wlm)"; exit 1; }
  done
  if [ -f "$dir/ctld.pid" ]; then log "$dir already has a running Slurm (stop it first)"; exit 1; fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  conf=$dir/slurm.conf
  export SLURM_CONF=$conf
  write_conf
  # -D: stay in the foreground, so $! is the daemon's PID; -c: forget any earlier state.
  setsid slurmctld -D -c -f "$conf" </dev/null >>"$dir/slurmctld.out" 2>&1 &
  echo $! >"$dir/ctld.pid"
  for n in n1 n2; do
    setsid slurmd -D -N $n -f "$conf" </dev/null >>"$dir/slurmd-$n.out" 2>&1 &
    echo $! >"$dir/slurmd-$n.pid.ours"
  done
  # Wait (at most ~60 s) until both nodes are idle.
  local states=""
  for _ in $(seq 300); do
    for f in "$dir/ctld.pid" "$dir/slurmd-n1.pid.ours" "$dir/slurmd-n2.pid.ours"; do
      if ! kill -0 "$(cat "$f")" 2>/dev/null; then
        log "a daemon exited during start-up ($(basename "$f"))"
        cat "$dir"/*.out >&2 2>/dev/null || true
        show_logs; stop; exit 1
      fi
    done
    states=$(timeout 5 sinfo -h -N -o '%N=%t' 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [ "$states" = "n1=idle n2=idle " ]; then
      log "up: nodes $states(SLURM_CONF=$conf)"
      echo "SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.2
  done
  log "nodes not idle after 60 s: ${states:-no answer from slurmctld}"
  show_logs; stop; exit 1
}

case $cmd in
  start) start ;;
  stop) stop; log "stopped" ;;
  *) usage ;;
esac
