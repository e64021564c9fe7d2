"""Cross-checks runner against Harbor's own models (harbor 0.13.1, installed by harbor-compat.sh).

read JOB_DIR
    Loads every record of a job directory written by `runner run` with Harbor's pydantic models
    (JobConfig, JobResult, JobLock, TrialConfig, TrialResult) and every trajectory with Harbor's
    trajectory validator. Exit 1 on the first model that refuses a file.

write OUT_DIR DIGESTS_FILE
    Writes a leaderboard-style job directory *through Harbor's models* (model_validate, then
    Harbor's own JSON dump): 5 trials per task of the dataset whose `runner tasks digest` output
    is in DIGESTS_FILE, with ATIF trajectories built from Harbor's Trajectory model. `runner
    validate-submission` must accept it.
"""

import json
import pathlib
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone

from harbor.models.job.config import JobConfig
from harbor.models.job.lock import JobLock
from harbor.models.job.result import JobResult
from harbor.models.trajectories import Agent, Observation, ObservationResult, Step, ToolCall, Trajectory
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult

AGENT = {"name": "terminus-2", "model_name": "anthropic/claude-opus-4-6", "kwargs": {"reasoning_effort": "high"}}


def read(job: pathlib.Path) -> int:
    checks = [(JobConfig, job / "config.json"), (JobResult, job / "result.json"), (JobLock, job / "lock.json")]
    for trial in sorted(p for p in job.iterdir() if p.is_dir()):
        checks += [(TrialConfig, trial / "config.json"), (TrialResult, trial / "result.json")]
    for model, path in checks:
        try:
            model.model_validate_json(path.read_text())
        except Exception as error:  # pydantic's ValidationError, or a missing file
            print(f"FAIL {model.__name__} {path}: {error}")
            return 1
    trajectories = sorted(job.glob("*/agent/trajectory.json"))
    for path in trajectories:
        result = subprocess.run(
            [sys.executable, "-m", "harbor.utils.trajectory_validator", str(path)], capture_output=True, text=True
        )
        if result.returncode != 0:
            print(f"FAIL trajectory {path}: {result.stdout}{result.stderr}")
            return 1
    print(f"harbor 0.13.1 reads {len(checks)} records and {len(trajectories)} trajectories of {job}")
    return 0


def trajectory(instruction: str) -> dict:
    steps = [
        Step(step_id=1, source="user", message=instruction),
        Step(
            step_id=2,
            source="agent",
            model_name="claude-opus-4-6",
            message="Run the solution.",
            tool_calls=[ToolCall(tool_call_id="call_1", function_name="bash", arguments={"command": "true"})],
            observation=Observation(results=[ObservationResult(source_call_id="call_1", content="")]),
        ),
    ]
    agent = Agent(name=AGENT["name"], version="2.0.0", model_name=AGENT["model_name"])
    return Trajectory(schema_version="ATIF-v1.6", session_id=str(uuid.uuid4()), agent=agent, steps=steps).to_json_dict()


def write(out: pathlib.Path, digests_file: pathlib.Path) -> int:
    lines = [line.split() for line in digests_file.read_text().splitlines() if line.strip()]
    tasks = [(name, digest) for digest, name, *rest in lines if not rest]
    dataset_name, dataset_digest = next((name, digest) for digest, name, *rest in lines if rest)
    job_id = str(uuid.uuid4())
    job_dir = out / "harbor-job"
    job_dir.mkdir(parents=True)
    config = JobConfig.model_validate(
        {"job_name": "harbor-job", "n_attempts": 5, "agents": [AGENT], "datasets": [{"name": dataset_name, "ref": dataset_digest}]}
    )
    (job_dir / "config.json").write_text(config.model_dump_json(indent=4))
    start = datetime.now(timezone.utc)
    n_trials = 0
    for attempt in range(5):
        for name, digest in tasks:
            trial_name = f"{name.split('/')[-1][:32]}__{uuid.uuid4().hex[:7]}"
            trial_dir = job_dir / trial_name
            (trial_dir / "agent").mkdir(parents=True)
            trial_config = TrialConfig.model_validate(
                {
                    "task": {"name": name, "ref": digest, "source": dataset_name},
                    "trial_name": trial_name,
                    "trials_dir": str(job_dir),
                    "agent": AGENT,
                    "job_id": job_id,
                }
            )
            (trial_dir / "config.json").write_text(trial_config.model_dump_json(indent=4))
            reward = 1.0 if attempt % 2 == 0 else 0.0
            org, short = name.split("/", 1)
            result = TrialResult.model_validate(
                {
                    "task_name": name,
                    "trial_name": trial_name,
                    "trial_uri": trial_dir.as_uri(),
                    "task_id": {"org": org, "name": short, "ref": digest},
                    "source": dataset_name,
                    "task_checksum": digest.removeprefix("sha256:"),
                    "config": trial_config.model_dump(),
                    "agent_info": {"name": AGENT["name"], "version": "2.0.0", "model_info": {"name": "claude-opus-4-6", "provider": "anthropic"}},
                    "verifier_result": {"rewards": {"reward": reward}},
                    "started_at": start,
                    "finished_at": start + timedelta(minutes=3),
                }
            )
            (trial_dir / "result.json").write_text(result.model_dump_json(indent=4))
            if reward > 0:
                (trial_dir / "agent" / "trajectory.json").write_text(json.dumps(trajectory("Do the task."), indent=2))
            n_trials += 1
    job_result = JobResult.model_validate(
        {"id": job_id, "started_at": start, "finished_at": start + timedelta(hours=1), "n_total_trials": n_trials, "stats": {}}
    )
    (job_dir / "result.json").write_text(job_result.model_dump_json(indent=4, exclude={"trial_results"}))
    print(f"wrote {n_trials} trials through harbor 0.13.1's models to {job_dir}")
    return 0


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "read":
        sys.exit(read(pathlib.Path(sys.argv[2])))
    if command == "write":
        sys.exit(write(pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])))
    sys.exit(f"unknown command {command}")
