#!/usr/bin/env bash
# Leaderboard preflight for a pull request: validates every submission dir the PR adds or
# changes with `runner validate-submission --format github`, so problems show up as annotations.
#
# A submission dir is the directory holding metadata.yaml under $PREFLIGHT_ROOT; its job dirs
# are its subdirectories with a config.json. Environment (all optional):
#   PREFLIGHT_BASE     base commit of the PR            (default: origin/main)
#   PREFLIGHT_HEAD     head commit of the PR            (default: HEAD)
#   PREFLIGHT_ROOT     where submissions live           (default: submissions)
#   PREFLIGHT_DATASET  dataset dir passed as --dataset  (default: none)
#   PREFLIGHT_MIN_TRIALS  --min-trials                  (default: runner's, 5)
#   RUNNER             the runner binary                (default: runner on PATH)
# Exit codes: 0 every submission valid (or none touched); 1 a submission is invalid or a file
# lies outside any submission dir; 2 bad input (e.g. the runner could not read a job dir).
set -euo pipefail

base="${PREFLIGHT_BASE:-origin/main}"
head="${PREFLIGHT_HEAD:-HEAD}"
root="${PREFLIGHT_ROOT:-submissions}"
root="${root%/}"
runner="${RUNNER:-runner}"

changed=$(git diff --name-only --diff-filter=ACMR "$base...$head" -- "$root/")
if [[ -z "$changed" ]]; then
    echo "No files under $root/ changed; nothing to validate."
    exit 0
fi

declare -A submissions=()
status=0
while IFS= read -r file; do
    dir=$(dirname "$file")
    found=""
    while [[ "$dir" == "$root"/* ]]; do
        if [[ -f "$dir/metadata.yaml" ]]; then
            found="$dir"
            break
        fi
        dir=$(dirname "$dir")
    done
    if [[ -z "$found" ]]; then
        echo "::error file=$file,title=submission_layout::$file is not inside a submission dir: put a metadata.yaml in the directory that holds the job dirs"
        status=1
    else
        submissions["$found"]=1
    fi
done <<< "$changed"

for sub in $(printf '%s\n' "${!submissions[@]}" | sort); do
    jobs=()
    for job in "$sub"/*/; do
        [[ -f "$job/config.json" ]] && jobs+=("${job%/}")
    done
    echo "::group::validate-submission $sub (${#jobs[@]} job dirs)"
    if [[ ${#jobs[@]} -eq 0 ]]; then
        echo "::error file=$sub/metadata.yaml,title=submission_layout::$sub has no job dirs (subdirectories with a config.json)"
        status=1
        echo "::endgroup::"
        continue
    fi
    args=(validate-submission --format github --metadata "$sub/metadata.yaml")
    [[ -n "${PREFLIGHT_DATASET:-}" ]] && args+=(--dataset "$PREFLIGHT_DATASET")
    [[ -n "${PREFLIGHT_MIN_TRIALS:-}" ]] && args+=(--min-trials "$PREFLIGHT_MIN_TRIALS")
    rc=0
    "$runner" "${args[@]}" "${jobs[@]}" || rc=$?
    echo "::endgroup::"
    if [[ $rc -ne 0 ]]; then
        echo "$sub: validate-submission exited $rc"
        # Bad input (2) outranks a failed rule (1).
        if [[ $rc -gt $status ]]; then status=$rc; fi
    fi
done
exit "$status"
