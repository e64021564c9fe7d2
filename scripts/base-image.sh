#!/usr/bin/env bash
# Make the offline base image the example tasks build FROM, when it is missing.
#
#   scripts/base-image.sh            ensure the image exists (near-instant when it does)
#   scripts/base-image.sh --force    rebuild the rootfs with debootstrap and re-import
#   scripts/base-image.sh --print-tag  print the versioned tag and exit
#
# The machine has no image registry, so the image is made from a Debian rootfs
# (debootstrap from the mirror configured in apt's sources) and `docker import`ed.
# Three levels, fastest first:
#   1. the versioned tag exists in Docker        -> only (re)point the alias tag
#   2. the rootfs tarball is in the cache        -> docker import (seconds)
#   3. nothing                                   -> debootstrap, trim, tar, import
# The versioned tag and the cache file are keyed on a hash of the RECIPE section
# below, so changing the recipe makes a new image instead of reusing a stale one.
#
# Environment:
#   RUNNER_CACHE_DIR   cache root (default <repo>/.cache); tarballs go in base-image/
#   DOCKER             docker CLI to use (default: docker)
set -euo pipefail

SCRIPT_PATH="$(readlink -f "${BASH_SOURCE[0]}")"
REPO_ROOT="$(cd "$(dirname "$SCRIPT_PATH")/.." && pwd)"
DOCKER="${DOCKER:-docker}"

# --- recipe begin ---
# Everything between the markers is hashed into the image tag and the cache key.
SUITE=bookworm
VARIANT=minbase
# python3 is the only addition: the example tests use a stdlib-only harness.
# minbase already has bash, coreutils (timeout, stat), findutils, tar and passwd (useradd).
INCLUDE=python3
IMAGE_REPO=runner-base
ALIAS_TAG=bookworm-py
IMAGE_PATH_ENV='PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
IMAGE_LANG_ENV='LANG=C.UTF-8'

# Drop what a test container never needs; it halves the image size.
trim_rootfs() {
    local root="$1"
    rm -rf "$root"/var/lib/apt/lists/* \
        "$root"/var/cache/apt/archives/*.deb \
        "$root"/var/cache/apt/*.bin \
        "$root"/var/cache/debconf/*-old \
        "$root"/usr/share/doc/* \
        "$root"/usr/share/man/* \
        "$root"/usr/share/info/* \
        "$root"/usr/share/locale/* \
        "$root"/var/log/*.log \
        "$root"/var/log/apt/* \
        "$root"/debootstrap
    # Python bytecode caches are regenerated on demand.
    find "$root"/usr/lib/python3* -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true
    # Docker bind-mounts these at run time; an empty file avoids leaking the host's.
    : >"$root"/etc/resolv.conf
    : >"$root"/etc/hostname
}
# --- recipe end ---

log() { printf '[base-image] %s\n' "$*" >&2; }
die() { printf '[base-image] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

recipe_hash() {
    sed -n '/^# --- recipe begin ---$/,/^# --- recipe end ---$/p' "$SCRIPT_PATH" |
        sha256sum | cut -c1-12
}

# The mirror is read from apt's configuration at run time, never hard-coded:
# first a deb822 stanza whose Suites list the suite, else a one-line sources.list entry.
apt_mirror() {
    local suite="$1" f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri="$(awk -v suite="$suite" '
            function flush() {
                if (uris != "" && has) { split(uris, u, " "); print u[1]; found = 1; exit }
                uris = ""; has = 0
            }
            /^[[:space:]]*$/ { flush(); next }
            /^[[:space:]]*#/ { next }
            tolower($1) == "uris:" { uris = ""; for (i = 2; i <= NF; i++) uris = uris " " $i }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) has = 1 }
            END { if (!found) flush() }
        ' "$f")"
        if [ -n "$uri" ]; then printf '%s\n' "$uri"; return 0; fi
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        uri="$(awk -v suite="$suite" '
            $1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' "$f")"
        if [ -n "$uri" ]; then printf '%s\n' "$uri"; return 0; fi
    done
    return 1
}

ensure_debootstrap() {
    command -v debootstrap >/dev/null 2>&1 && return 0
    log "debootstrap is missing; installing it with apt-get"
    [ "$(id -u)" -eq 0 ] || die "installing debootstrap needs root; run: sudo apt-get install -y debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

image_exists() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

import_tarball() {
    local tarball="$1" tag="$2" t0
    t0="$(now)"
    "$DOCKER" import \
        --change "ENV $IMAGE_PATH_ENV" \
        --change "ENV $IMAGE_LANG_ENV" \
        --change 'CMD ["/bin/bash"]' \
        --message "runner base image, recipe $HASH" \
        "$tarball" "$tag" >/dev/null
    log "imported $tag from $tarball in $(elapsed "$t0")"
}

build_tarball() {
    local tarball="$1" mirror t0 keyring=()
    ensure_debootstrap
    [ "$(id -u)" -eq 0 ] || die "debootstrap needs root (it creates device nodes and chroots)"
    mirror="$(apt_mirror "$SUITE")" ||
        die "no '$SUITE' mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; add one and retry"
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
        keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
    # Global, so the EXIT trap still sees it: remove the half-built rootfs whatever happens.
    WORK="$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT
    local work="$WORK"
    t0="$(now)"
    log "debootstrap --variant=$VARIANT --include=$INCLUDE $SUITE (mirror from apt sources)"
    if ! debootstrap --variant="$VARIANT" --include="$INCLUDE" "${keyring[@]}" \
        "$SUITE" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
        tail -n 20 "$work/debootstrap.log" >&2
        die "debootstrap failed (log above); check apt's mirror configuration and disk space"
    fi
    log "debootstrap done in $(elapsed "$t0")"
    t0="$(now)"
    trim_rootfs "$work/rootfs"
    log "trimmed rootfs to $(du -sh "$work/rootfs" | cut -f1) in $(elapsed "$t0")"
    t0="$(now)"
    # Write then rename, so a crash never leaves a truncated tarball that looks valid.
    tar --numeric-owner -C "$work/rootfs" -cf "$tarball.tmp" .
    mv -f "$tarball.tmp" "$tarball"
    log "cached rootfs tarball $tarball ($(du -h "$tarball" | cut -f1)) in $(elapsed "$t0")"
    rm -rf "$work"
    trap - EXIT
}

main() {
    local force=0 print_tag=0 arg
    for arg in "$@"; do
        case "$arg" in
        --force) force=1 ;;
        --print-tag) print_tag=1 ;;
        -h | --help) sed -n '2,20p' "$SCRIPT_PATH" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$arg' (try --help)" ;;
        esac
    done

    HASH="$(recipe_hash)"
    local tag="$IMAGE_REPO:$ALIAS_TAG-$HASH" alias="$IMAGE_REPO:$ALIAS_TAG"
    if [ "$print_tag" -eq 1 ]; then printf '%s\n' "$tag"; exit 0; fi

    "$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
        die "cannot reach the Docker engine ($DOCKER version failed); start dockerd or set DOCKER_HOST"

    CACHE_DIR="${RUNNER_CACHE_DIR:-$REPO_ROOT/.cache}/base-image"
    mkdir -p "$CACHE_DIR"
    local tarball="$CACHE_DIR/rootfs-$SUITE-$VARIANT-$HASH.tar" t_start
    t_start="$(now)"

    # Parallel test processes may call this at once; one builds, the others wait.
    exec 9>"$CACHE_DIR/.lock"
    flock 9

    if [ "$force" -eq 0 ] && image_exists "$tag"; then
        log "image $tag exists"
    else
        if [ "$force" -eq 1 ] || [ ! -s "$tarball" ]; then
            build_tarball "$tarball"
        else
            log "using cached rootfs $tarball"
        fi
        import_tarball "$tarball" "$tag"
    fi
    # The alias is what Dockerfiles name; re-point it in case it drifted to an older recipe.
    "$DOCKER" tag "$tag" "$alias"
    log "ready: $tag (alias $alias) in $(elapsed "$t_start")"
}

main "$@"
