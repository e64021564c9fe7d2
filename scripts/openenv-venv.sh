#!/usr/bin/env bash
# The venv the `runner serve` end-to-end tests drive the server from (tests/e2e/serve.rs):
# the published openenv-core client from the Python package index, pinned, under
# .cache/openenv/ (made once; near-instant when it is there). Prints the venv's python.
#
#   scripts/openenv-venv.sh     make it when missing
#
# Needs Python >= 3.10 with venv and the package registry. .ci/run calls it before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

version="0.3.0"
venv=".cache/openenv"
if [[ -x "$venv/bin/python" ]] \
    && "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('openenv-core') != '$version')" 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi
python=$(command -v python3)
# Twice: a venv's ensurepip has failed once in a while on a loaded machine.
for attempt in 1 2; do
    rm -rf "$venv"
    if "$python" -m venv "$venv" >&2 \
        && "$venv/bin/pip" install --quiet --disable-pip-version-check "openenv-core==$version" >&2; then
        echo "$venv/bin/python"
        exit 0
    fi
    echo "openenv-venv: attempt $attempt failed" >&2
done
echo "openenv-venv: could not install openenv-core $version from the Python package index" >&2
exit 1
