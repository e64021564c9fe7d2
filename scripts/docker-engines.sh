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
#   scripts/docker-engines.sh tls I PORT  start engine I also on tcp://127.0.0.1:PORT with
#                                         --tlsverify: its CA and server certificate in
#                                         /run/runner-engines/I/tls, a client's files as
#                                         DOCKER_CERT_PATH wants them in .../I/client
#   scripts/docker-engines.sh certs DIR   make a CA and a client certificate signed by it in
#                                         DIR (ca.pem, cert.pem, key.pem; openssl)
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

# A CA (ca.pem, ca-key.pem) in $1 unless there is one (a name of its own: two CAs of this
# script are told apart as different issuers), and a certificate signed by it:
# cert_for DIR NAME EXTENSIONS writes DIR/NAME-cert.pem and DIR/NAME-key.pem (P-256).
make_ca() {
    [ -f "$1/ca.pem" ] && return 0
    mkdir -p "$1"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
        -subj "/CN=runner test CA $(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')" -keyout "$1/ca-key.pem" -out "$1/ca.pem" 2>/dev/null
}
cert_for() {
    local dir=$1 name=$2 ext=$3
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
        -keyout "$dir/$name-key.pem" -out "$dir/$name.csr" 2>/dev/null
    printf '%b\n' "$ext" >"$dir/$name.ext"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
        -CAcreateserial -days 3650 -extfile "$dir/$name.ext" -out "$dir/$name-cert.pem" 2>/dev/null
    rm -f "$dir/$name.csr" "$dir/$name.ext"
    chmod 600 "$dir/$name-key.pem"
}
# DIR as DOCKER_CERT_PATH wants it: ca.pem, and cert.pem/key.pem of a client signed by it.
client_certs() {
    make_ca "$1"
    cert_for "$1" client 'extendedKeyUsage=clientAuth'
    mv "$1/client-cert.pem" "$1/cert.pem"
    mv "$1/client-key.pem" "$1/key.pem"
}

# start_one I [DOCKERD ARGS...]: engine I, with extra listeners or options when given.
start_one() {
    local i=$1 dir="$root/$1"
    shift
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
        --default-address-pool "base=$range,size=24" "$@" >"$dir/dockerd.log" 2>&1 &
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
tls)
    i=${2:?usage: scripts/docker-engines.sh tls I PORT}
    port=${3:?usage: scripts/docker-engines.sh tls I PORT}
    tls="$root/$i/tls" client="$root/$i/client"
    docker image inspect "$base" >/dev/null 2>&1 || bash "$(dirname "$0")/base-image.sh" >/dev/null
    if [ ! -f "$tls/server-cert.pem" ]; then
        make_ca "$tls"
        cert_for "$tls" server 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'
    fi
    if [ ! -f "$client/cert.pem" ]; then
        mkdir -p "$client"
        cp "$tls/ca.pem" "$tls/ca-key.pem" "$client/"
        client_certs "$client"
        rm -f "$client/ca-key.pem"
    fi
    start_one "$i" --tlsverify --tlscacert "$tls/ca.pem" --tlscert "$tls/server-cert.pem" \
        --tlskey "$tls/server-key.pem" -H "tcp://127.0.0.1:$port"
    if ! DOCKER_CERT_PATH="$client" docker --tlsverify -H "tcp://127.0.0.1:$port" info >/dev/null 2>&1; then
        echo "engine $i answers on its socket but not with TLS on 127.0.0.1:$port (started without it? stop it first)" >&2
        exit 1
    fi
    load_base "$i"
    echo "engine ready: tcp://127.0.0.1:$port (DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=$client)"
    ;;
certs)
    client_certs "${2:?usage: scripts/docker-engines.sh certs DIR}"
    ;;
hosts)
    n=${2:?usage: scripts/docker-engines.sh hosts N}
    for i in $(seq 1 "$n"); do printf 'unix://%s%s' "$(socket "$i")" "$([ "$i" -lt "$n" ] && echo ,)"; done
    echo
    ;;
*)
    echo "usage: scripts/docker-engines.sh start N | stop | hosts N | tls I PORT | certs DIR" >&2
    exit 2
    ;;
esac
