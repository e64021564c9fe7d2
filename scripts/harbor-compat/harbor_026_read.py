"""Harbor 0.26's own models read a job directory runner wrote, record by record, and every
field they define is present in runner's records (fields only runner writes are listed, as
runner-only additions). lock.json is left out: 0.26's lock (schema 3) is a different document.

    python harbor_026_read.py JOB_DIR        (with harbor==0.26.0 installed; Python >= 3.12)

Exit 0 when every record validates and no field 0.26 defines is missing, 1 otherwise.
"""

import json
import pathlib
import sys

from harbor.models.job.config import JobConfig
from harbor.models.job.result import JobResult
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult

# Keys 0.26 computes or keeps only in memory, never expected in a runner record.
NOT_WRITTEN = {"result.json": {"trial_results"}}


def differences(ours, theirs, prefix=""):
    """(only_ours, only_theirs) key paths between two JSON values."""
    only_ours, only_theirs = [], []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        only_ours += [prefix + k for k in sorted(set(ours) - set(theirs))]
        only_theirs += [prefix + k for k in sorted(set(theirs) - set(ours))]
        for key in sorted(set(ours) & set(theirs)):
            a, b = differences(ours[key], theirs[key], f"{prefix}{key}.")
            only_ours += a
            only_theirs += b
    return only_ours, only_theirs


def check(model, path, job, failures, runner_only):
    name = str(path.relative_to(job))
    try:
        ours = json.loads(path.read_text())
        parsed = model.model_validate(ours)
    except Exception as error:  # noqa: BLE001 - report any rejection
        failures.append(f"{name}: Harbor 0.26's {model.__name__} rejects it: {error}")
        return
    theirs = json.loads(parsed.model_dump_json())
    only_ours, only_theirs = differences(ours, theirs)
    skip = NOT_WRITTEN.get(path.name if path.parent == job else "", set())
    missing = [key for key in only_theirs if key not in skip]
    if missing:
        failures.append(f"{name}: fields Harbor 0.26 defines that runner does not write: {missing}")
    runner_only.update(only_ours)
    print(f"ok   {name}: read by {model.__name__}")


def main():
    job = pathlib.Path(sys.argv[1])
    failures, runner_only = [], set()
    check(JobConfig, job / "config.json", job, failures, runner_only)
    check(JobResult, job / "result.json", job, failures, runner_only)
    trials = [t for t in sorted(job.iterdir()) if (t / "result.json").is_file()]
    if not trials:
        failures.append(f"{job}: no trial to read")
    for trial in trials:
        check(TrialResult, trial / "result.json", job, failures, runner_only)
        check(TrialConfig, trial / "config.json", job, failures, runner_only)
    print("runner-only additions (ignored by Harbor 0.26):", ", ".join(sorted(runner_only)))
    for failure in failures:
        print("FAIL", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
