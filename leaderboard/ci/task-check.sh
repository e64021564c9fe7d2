#!/usr/bin/env bash
# Task check for a pull request to a dataset repository: runs `runner tasks check --format
# github` on every task directory the PR adds or changes, so each defect shows as an
# annotation on the task's file.
#
# A task dir is a directory holding task.toml at any depth under $TASK_CHECK_ROOT (deleted
# tasks are skipped). Environment (all optional):
#   TASK_CHECK_BASE   base commit of the PR                        (default: origin/main)
#   TASK_CHECK_HEAD   head commit of the PR                        (default: HEAD)
#   TASK_CHECK_ROOT   where tasks live                             (default: .)
#   TASK_CHECK_ARGS   more flags for tasks check, e.g. "--repeat 3" (default: none)
#   RUNNER            the runner binary                            (default: runner on PATH)
# Exit codes: 0 no check failed (or no task touched); 1 a check failed; otherwise the worst
# code tasks check gave (2 bad input).
#
# A GitHub Actions job (the runner binary and a Docker engine on the machine):
#
#   task-check:
#     runs-on: ubuntu-latest
#     steps:
#       - uses: actions/checkout@v4
#         with: { fetch-depth: 0 }
#       - run: leaderboard/ci/task-check.sh
#         env:
#           TASK_CHECK_BASE: origin/${{ github.base_ref }}
#           TASK_CHECK_ROOT: tasks
set -euo pipefail

base="${TASK_CHECK_BASE:-origin/main}"
head="${TASK_CHECK_HEAD:-HEAD}"
root="${TASK_CHECK_ROOT:-.}"
root="${root%/}"
runner="${RUNNER:-runner}"
read -r -a extra <<< "${TASK_CHECK_ARGS:-}"

changed=$(git diff --name-only --diff-filter=ACMR "$base...$head" -- "$root/")
if [[ -z "$changed" ]]; then
    echo "No files under $root/ changed; no task to check."
    exit 0
fi

declare -A tasks=()
while IFS= read -r file; do
    dir=$(dirname "$file")
    while [[ "$dir" != "." && "$dir" != "/" ]]; do
        if [[ -f "$dir/task.toml" ]]; then
            tasks["$dir"]=1
            break
        fi
        [[ "$dir" == "$root" ]] && break
        dir=$(dirname "$dir")
    done
done <<< "$changed"

if [[ ${#tasks[@]} -eq 0 ]]; then
    echo "No task directory changed under $root/."
    exit 0
fi

status=0
for dir in $(printf '%s\n' "${!tasks[@]}" | sort); do
    echo "::group::tasks check $dir"
    code=0
    "$runner" tasks check --format github "${extra[@]}" "$dir" || code=$?
    echo "::endgroup::"
    # The worst code wins: bad input (2) or a runner failure (4) outranks a failed check (1).
    if (( code > status )); then
        status=$code
    fi
done
exit "$status"
