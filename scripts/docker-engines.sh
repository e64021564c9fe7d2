#!/usr/bin/env bash
# Extra Docker engines beside the machine's own, for the pool's tests and benchmark: engine I
# (1..N) is a `dockerd` with its own config file (the machine's daemon.json sets data-root,
# which would clash), data root, exec root, pid file, socket and bridge, listening only on
# unix:///run/runner-engines/I/docker.sock. Each gets the offline base image from the default
# engine (`docker save | docker load`).
#
#   scripts/docker-engines.sh start N     start engines 1..N (those running are kept)
#   scripts/docker-engines.sh stop        stop every engine this script started
#   scripts/docker-engines.sh hosts N     print their URLs, comma-separated
#
# Engine I's addresses are 10.(220+I).0.0/16: its bridge (runner-eng-I) the first /24, its
# networks (compose sidecars, per-trial networks) /24s from the rest. The engines run with
# iptables and masquerading off, so nothing of theirs is routed out of this machine; the
# machine's own engine sets the FORWARD policy to DROP, so one rule per engine lets traffic
# within that engine's range through (its containers reach each other, as Docker's own rule
# lets containers on one network; unlike the default engine, two trials' networks on one
# extra engine are not isolated from each other: these engines are for tests and benchmarks).
set -euo pipefail
root=/run/runner-engines
base=runner-base:bookworm-py

socket() { echo "$root/$1/docker.sock"; }

start_one() {
    local i=$1 dir="$root/$1"
    if [ -S "$(socket "$i")" ] && docker -H "unix://$(socket "$i")" info >/dev/null 2>&1; then
        return 0
    fi
    mkdir -p "$dir" "/var/lib/runner-engine-$i"
    local bridge="runner-eng-$i" range="10.$((220 + i)).0.0/16"
    if ! ip link show "$bridge" >/dev/null 2>&1; then
        ip link add name "$bridge" type bridge
        ip addr add "10.$((220 + i)).0.1/24" dev "$bridge"
    fi
    ip link set "$bridge" up
    iptables -C FORWARD -s "$range" -d "$range" -j ACCEPT 2>/dev/null \
        || iptables -I FORWARD 1 -s "$range" -d "$range" -j ACCEPT
    # dockerd 20.10, restarted with default address pools over a data root that holds its
    # old default bridge network, deletes the interface named docker0 (the machine's own
    # engine's bridge) while clearing that network: the network store starts empty instead.
    rm -f "/var/lib/runner-engine-$i/network/files/local-kv.db"
    # The storage driver of the machine's own engine (fuse-overlayfs here), nothing else.
    local driver
    driver=$(docker info --format '{{.Driver}}')
    printf '{"storage-driver": "%s", "mtu": 1400}\n' "$driver" >"$dir/daemon.json"
    nohup dockerd --config-file "$dir/daemon.json" --data-root "/var/lib/runner-engine-$i" \
        --exec-root "$dir/exec" --pidfile "$dir/docker.pid" -H "unix://$(socket "$i")" \
        --bridge "$bridge" --iptables=false --ip-masq=false \
        --default-address-pool "base=$range,size=24" >"$dir/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do
        docker -H "unix://$(socket "$i")" info >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! docker -H "unix://$(socket "$i")" info >/dev/null 2>&1; then
        echo "engine $i did not start; its log:" >&2
        tail -n 30 "$dir/dockerd.log" >&2
        exit 1
    fi
}

load_base() {
    local i=$1 id
    id=$(docker image inspect --format '{{.Id}}' "$base")
    if [ "$(docker -H "unix://$(socket "$i")" image inspect --format '{{.Id}}' "$base" 2>/dev/null)" != "$id" ]; then
        docker save "$base" | docker -H "unix://$(socket "$i")" load >/dev/null
    fi
}

case "${1:-}" in
start)
    n=${2:?usage: scripts/docker-engines.sh start N}
    docker image inspect "$base" >/dev/null 2>&1 || bash "$(dirname "$0")/base-image.sh" >/dev/null
    for i in $(seq 1 "$n"); do
        start_one "$i"
        load_base "$i"
    done
    if ! ip link show docker0 >/dev/null 2>&1 && docker network inspect bridge >/dev/null 2>&1; then
        echo "the machine's own engine lost its docker0 bridge while engines started" >&2
        exit 1
    fi
    echo "engines ready: $(bash "$0" hosts "$n")"
    ;;
stop)
    for pidfile in "$root"/*/docker.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    done
    ;;
hosts)
    n=${2:?usage: scripts/docker-engines.sh hosts N}
    for i in $(seq 1 "$n"); do printf 'unix://%s%s' "$(socket "$i")" "$([ "$i" -lt "$n" ] && echo ,)"; done
    echo
    ;;
*)
    echo "usage: scripts/docker-engines.sh start N | stop | hosts N" >&2
    exit 2
    ;;
esac
