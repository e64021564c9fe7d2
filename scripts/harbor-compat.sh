#!/usr/bin/env bash
# Cross-check against Harbor itself: Harbor 0.13.1's own models and trajectory validator, and
# Harbor 0.26.0's models, read a job directory written by `runner run`, and `runner
# validate-submission` reads a job written through Harbor's models (failing only the rules
# Harbor's records cannot meet).
#
#   scripts/harbor-compat.sh JOB_DIR      JOB_DIR: a job written by `runner run` (any agent)
#   scripts/harbor-compat.sh --prepare    only make the two Harbor venvs (CI does it while the
#                                         workspace compiles; pip mostly waits on the network)
#
# Needs Python >= 3.12 (Harbor's requirement) and the Python package registry; the venv is
# cached under .cache/harbor-compat/. Exit 0 when both directions pass, 1 otherwise, 3 when no
# Python >= 3.12 is available or harbor cannot be installed (said plainly, so a skip is never
# silent).
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:?usage: scripts/harbor-compat.sh JOB_DIR}"
harbor_version=0.13.1
harbor_026=0.26.0

python=""
for candidate in python3.13 python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python; do
    if command -v "$candidate" >/dev/null 2>&1 \
        && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        python="$candidate"
        break
    fi
done
if [[ -z "$python" ]]; then
    echo "harbor-compat: SKIPPED: Harbor needs Python >= 3.12 and none is installed" >&2
    exit 3
fi

# A venv with harbor==$1 under .cache/harbor-compat/, made once; its path on stdout.
harbor_venv() {
    local venv=".cache/harbor-compat/harbor-$1"
    if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import harbor' 2>/dev/null; then
        # Twice: a venv's ensurepip has failed once in a while on a loaded machine.
        local attempt
        for attempt in 1 2; do
            rm -rf "$venv"
            if "$python" -m venv "$venv" >&2 \
                && "$venv/bin/pip" install --quiet --disable-pip-version-check "harbor==$1" >&2; then
                break
            fi
            rm -rf "$venv"
            if [[ $attempt == 2 ]]; then
                echo "harbor-compat: SKIPPED: could not install harbor $1 from the Python package registry" >&2
                exit 3
            fi
        done
    fi
    echo "$venv"
}

if [[ "$job" == --prepare ]]; then
    harbor_venv "$harbor_version" >/dev/null
    harbor_venv "$harbor_026" >/dev/null
    exit 0
fi
venv=$(harbor_venv "$harbor_version")

cargo build --quiet -p runner
runner=target/debug/runner
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== Harbor $harbor_version reads the job runner wrote"
"$venv/bin/python" scripts/harbor-compat/harbor_compat.py read "$job"

# Harbor 0.26 too: its models read every record (lock.json, schema 3, included), every field
# they define is in runner's records, and each trial's task_checksum is Harbor's own.
venv_026=$(harbor_venv "$harbor_026")
echo "== Harbor $harbor_026 reads the job runner wrote"
"$venv_026/bin/python" scripts/harbor-compat/harbor_026_read.py "$job"
echo "== runner's task digests are Harbor $harbor_026's packager's"
"$venv_026/bin/python" scripts/harbor-compat/task_digests_026.py "$runner" tasks/examples \
    tasks/families tests/fixtures/tasks/harborignore

echo "== runner validates a job written through Harbor's models"
"$runner" tasks digest tasks/examples > "$work/digests.txt"
"$venv/bin/python" scripts/harbor-compat/harbor_compat.py write "$work" "$work/digests.txt"
# Harbor's records cannot list, in 0.13, the planned trials (lock.json); every other rule of the
# leaderboard verdict must pass on them, and runner's evidence (verifier_isolation…) is "not
# recorded" there, never failed.
set +e
"$runner" validate-submission "$work/harbor-job" --dataset tasks/examples --format json \
    > "$work/validation.json"
set -e
"$venv/bin/python" - "$work/validation.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
failed = {rule["rule"] for rule in report["rules"] if rule["status"] == "failed"}
# trajectories_bound: the job written through Harbor's models carries one placeholder trajectory
# ("Do the task.") per trial, which is not the task's instruction, and the rule says so.
expected = {"planned_trials", "trajectories_bound"}
not_recorded = set(report["verdicts"]["evidence"]["not_recorded"])
if failed != expected or "verifier_isolated" not in not_recorded:
    print(f"harbor-compat: validate-submission failed {sorted(failed)}, expected exactly {sorted(expected)}, "
          f"with verifier_isolated not recorded (not recorded: {sorted(not_recorded)})")
    print(json.dumps(report, indent=2))
    sys.exit(1)
print(f"validate-submission reads Harbor's job; only {sorted(expected)} fail, as they must")
PY
