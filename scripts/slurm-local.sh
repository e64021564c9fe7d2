#!/usr/bin/env bash
# A single-node Slurm on this machine, from Debian's packages: munged, slurmctld and slurmd on
# localhost, one partition holding this host with its own CPUs and memory. The end-to-end test
# of sharded runs (tests/e2e/slurm.rs) submits a job array to it; .ci/run starts it first.
#
# Idempotent: when the controller answers and the node is idle, it does nothing. Needs root
# (it installs packages and starts daemons). Exits non-zero, with the daemons' logs, when the
# node does not become idle: a missing Slurm is a failure, never a skip.
#
#   bash scripts/slurm-local.sh            # install if missing, configure, start, wait
#   bash scripts/slurm-local.sh --stop     # stop the daemons it started
set -euo pipefail

state=/var/lib/runner-slurm
logs=/var/log/runner-slurm
conf=/etc/slurm/slurm.conf

if [ "${1:-}" = "--stop" ]; then
    for pidfile in /run/slurmd.pid /run/slurmctld.pid "$state/munged.pid"; do
        if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
    done
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "error: scripts/slurm-local.sh needs root (it installs Slurm and starts its daemons)" >&2
    exit 1
fi

host=$(hostname -s)

node_state() { sinfo -h -n "$host" -o '%T' 2>/dev/null | head -n 1; }

if command -v scontrol >/dev/null 2>&1 && scontrol ping 2>/dev/null | grep -q UP \
    && [ "$(node_state)" = idle ]; then
    echo "slurm: already up, node $host idle"
    exit 0
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
    || ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    echo "slurm: installing slurmctld, slurmd, slurm-client and munge"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null
fi

mkdir -p "$state/ctld" "$state/d" "$logs" /etc/slurm /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge

# munge: the package makes a key at install; make one if it is missing.
if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile=/etc/munge/munge.key --force
    else
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --pid-file="$state/munged.pid" 2>/dev/null \
        || runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 1 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
fi
munge -n | unmunge >/dev/null

# The node as slurmd sees it (CPUs, sockets, cores, threads, memory), so the controller
# never drains it for a mismatch.
node=$(slurmd -C | head -n 1)
case "$node" in
    NodeName=*) ;;
    *) echo "error: slurmd -C did not describe this node: $node" >&2; exit 1 ;;
esac
cat >"$conf.tmp" <<EOF
# Written by scripts/slurm-local.sh: a single-node Slurm for runner's end-to-end tests.
ClusterName=runner-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
mv "$conf.tmp" "$conf"
# Debian's binaries read /etc/slurm/slurm.conf; cgroup.conf is not needed with linuxproc.

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if running /run/slurmctld.pid; then
    scontrol reconfigure >/dev/null 2>&1 || true
else
    slurmctld
fi
for _ in $(seq 1 30); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 1; done
running /run/slurmd.pid || slurmd

ok=
for _ in $(seq 1 60); do
    s=$(node_state)
    case "$s" in
        idle) ok=1; break ;;
        down*|drain*|drained*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 1
done
if [ -z "$ok" ]; then
    echo "error: Slurm's node $host is not idle (state: $(node_state)); the daemons' logs:" >&2
    tail -n 30 "$logs/slurmctld.log" "$logs/slurmd.log" >&2 2>/dev/null || true
    exit 1
fi
echo "slurm: up, node $host idle ($(sinfo -h -n "$host" -o '%c CPUs, %m MB'))"
