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
# The bridges (runner-eng-I, 10.213.I.1/24) are made with iptables and masquerading off:
# containers on these engines reach each other and the host, never further.
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
    local bridge="runner-eng-$i"
    if ! ip link show "$bridge" >/dev/null 2>&1; then
        ip link add name "$bridge" type bridge
        ip addr add "10.213.$i.1/24" dev "$bridge"
    fi
    ip link set "$bridge" up
    # The storage driver of the machine's own engine (fuse-overlayfs here), nothing else.
    local driver
    driver=$(docker info --format '{{.Driver}}')
    printf '{"storage-driver": "%s", "mtu": 1400}\n' "$driver" >"$dir/daemon.json"
    nohup dockerd --config-file "$dir/daemon.json" --data-root "/var/lib/runner-engine-$i" \
        --exec-root "$dir/exec" --pidfile "$dir/docker.pid" -H "unix://$(socket "$i")" \
        --bridge "$bridge" --iptables=false --ip-masq=false >"$dir/dockerd.log" 2>&1 &
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
    echo "engines ready: $(bash "$0" hosts "$n")"
    ;;
stop)
    for pidfile in "$root"/*/docker.pid; do
        [ -f "$pidfile" ] || continue
        kill "$(cat "$pidfile")" 2>/dev/null || true
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
