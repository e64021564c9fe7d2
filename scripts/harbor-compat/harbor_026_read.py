"""Harbor 0.26's own models read a job directory runner wrote, record by record (lock.json,
schema 3, included), and every field they define is present in runner's records (fields only
runner writes are listed, as runner-only additions). Each trial's `task_checksum` must equal
what Harbor's own `Task.checksum` computes for the task directory the trial ran.

    python harbor_026_read.py JOB_DIR        (with harbor==0.26.0 installed; Python >= 3.12)

Exit 0 when every record validates and no field 0.26 defines is missing, 1 otherwise.
"""

import asyncio
import json
import pathlib
import sys

import warnings

from harbor.models.job.config import JobConfig
from harbor.models.job.lock import JobLock, TrialLock
from harbor.models.job.result import JobResult, JobStats
from harbor.models.trial.config import TrialConfig
from harbor.models.task.task import Task
from harbor.models.trial.result import TrialResult

# Keys 0.26 computes or keeps only in memory, never expected in a runner record.
NOT_WRITTEN = {"result.json": {"trial_results"}}


def differences(ours, theirs, prefix=""):
    """(only_ours, only_theirs) key paths between two JSON values, into lists element by
    element (a list's elements share the path `key[]`, each path listed once)."""
    only_ours, only_theirs = [], []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        only_ours += [prefix + k for k in sorted(set(ours) - set(theirs))]
        only_theirs += [prefix + k for k in sorted(set(theirs) - set(ours))]
        for key in sorted(set(ours) & set(theirs)):
            a, b = differences(ours[key], theirs[key], f"{prefix}{key}.")
            only_ours += a
            only_theirs += b
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for a_item, b_item in zip(ours, theirs):
            a, b = differences(a_item, b_item, prefix[:-1] + "[].")
            only_ours += [k for k in a if k not in only_ours]
            only_theirs += [k for k in b if k not in only_theirs]
    return only_ours, only_theirs


def check(model, path, job, failures, runner_only, exclude_none=False):
    """`model` reads `path`, and `path` has every key `model` writes (Harbor writes its locks
    with `exclude_none`, so a lock's null fields are compared as 0.26 writes them: absent)."""
    name = str(path.relative_to(job))
    try:
        ours = json.loads(path.read_text())
        parsed = model.model_validate(ours)
    except Exception as error:  # noqa: BLE001 - report any rejection
        failures.append(f"{name}: Harbor 0.26's {model.__name__} rejects it: {error}")
        return
    theirs = json.loads(parsed.model_dump_json(exclude_none=exclude_none))
    only_ours, only_theirs = differences(ours, theirs)
    skip = NOT_WRITTEN.get(path.name if path.parent == job else "", set())
    missing = [key for key in only_theirs if key not in skip]
    if missing:
        failures.append(f"{name}: fields Harbor 0.26 defines that runner does not write: {missing}")
    runner_only.update(only_ours)
    print(f"ok   {name}: read by {model.__name__}")


def check_task_checksum(trial, job, failures, task_dirs):
    """The trial's task_checksum equals Harbor's own for the task directory it ran (its
    lock.json entry's task path, by runner's trial name)."""
    result = json.loads((trial / "result.json").read_text())
    task_dir = task_dirs.get(trial.name)
    if not task_dir or not pathlib.Path(task_dir).is_dir():
        failures.append(f"{trial.relative_to(job)}: lock.json's task path {task_dir!r} is not a directory")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = Task(task_dir).checksum
    if result["task_checksum"] != theirs:
        failures.append(
            f"{trial.relative_to(job)}: task_checksum {result['task_checksum']} but Harbor 0.26 "
            f"computes {theirs} for {task_dir}"
        )
    else:
        print(f"ok   {trial.relative_to(job)}: task_checksum equals Harbor's")


def check_sources(job, trials, failures, task_dirs):
    """Each trial's `source` is what Harbor 0.26 gives the tasks of the job's dataset (its
    own `DatasetConfig.get_task_configs`, run over the same dataset directory)."""
    config = JobConfig.model_validate_json((job / "config.json").read_text())
    expected = {}
    for dataset in config.datasets:
        for task in asyncio.run(dataset.get_task_configs()):
            expected[str(pathlib.Path(task.path).resolve())] = task.source
    for trial in trials:
        result = json.loads((trial / "result.json").read_text())
        path = str(pathlib.Path(task_dirs.get(trial.name) or "").resolve())
        if path not in expected:
            failures.append(f"{trial.relative_to(job)}: its task {path} is in none of the job's datasets")
            continue
        for where, value in [("source", result["source"]), ("config.task.source", result["config"]["task"]["source"])]:
            if value != expected[path]:
                failures.append(
                    f"{trial.relative_to(job)}/result.json: {where} {value!r}, Harbor 0.26 "
                    f"records {expected[path]!r} for that dataset"
                )
    print(f"ok   trial sources checked against Harbor 0.26's for {len(expected)} dataset task(s)")


def check_eval_keys(job, trials, failures):
    """result.json's eval keys are those Harbor 0.26's JobStats makes of the trials' records."""
    records = [TrialResult.model_validate_json((t / "result.json").read_text()) for t in trials]
    theirs = set(JobStats.from_trial_results(records).evals)
    ours = set(json.loads((job / "result.json").read_text())["stats"]["evals"])
    if ours != theirs:
        failures.append(f"result.json: eval keys {sorted(ours)}, Harbor 0.26 makes {sorted(theirs)}")
    else:
        print(f"ok   result.json: eval keys {sorted(ours)} are Harbor 0.26's")


def main():
    job = pathlib.Path(sys.argv[1])
    failures, runner_only = [], set()
    check(JobConfig, job / "config.json", job, failures, runner_only)
    check(JobResult, job / "result.json", job, failures, runner_only)
    check(JobLock, job / "lock.json", job, failures, runner_only, exclude_none=True)
    lock = json.loads((job / "lock.json").read_text())
    task_dirs = {t.get("trial_name"): t["task"].get("path") for t in lock.get("trials", [])}
    trials = [t for t in sorted(job.iterdir()) if (t / "result.json").is_file()]
    if not trials:
        failures.append(f"{job}: no trial to read")
    for trial in trials:
        check(TrialResult, trial / "result.json", job, failures, runner_only)
        check(TrialConfig, trial / "config.json", job, failures, runner_only)
        check(TrialLock, trial / "lock.json", job, failures, runner_only, exclude_none=True)
        check_task_checksum(trial, job, failures, task_dirs)
    if trials:
        check_sources(job, trials, failures, task_dirs)
        check_eval_keys(job, trials, failures)
    print("runner-only additions (ignored by Harbor 0.26):", ", ".join(sorted(runner_only)))
    for failure in failures:
        print("FAIL", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
