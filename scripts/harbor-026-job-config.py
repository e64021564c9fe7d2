"""Writes tests/fixtures/harbor-0.26/config.json the way Harbor 0.26 writes a job's config.json
(`JobConfig.model_dump_json(indent=4)`, harbor/job.py), for the end-to-end test that runs it
with `runner run -c`.

Run it with Harbor 0.26's own models installed (they are not committed):
    python3 -m venv /tmp/h026 && /tmp/h026/bin/pip install --ignore-requires-python harbor==0.26.0
    /tmp/h026/bin/python scripts/harbor-026-job-config.py > tests/fixtures/harbor-0.26/config.json
Harbor 0.26 asks for Python 3.12; on 3.11 its models load once `typing` has the two names they
import from it (`override`, and a `TypedDict` pydantic accepts), taken from typing_extensions.
"""

import sys
import typing

import typing_extensions

if sys.version_info < (3, 12):
    typing.override = typing_extensions.override
    typing.TypedDict = typing_extensions.TypedDict

from harbor.models.job.config import DatasetConfig, JobConfig  # noqa: E402

config = JobConfig(
    job_name="harbor-026",
    n_attempts=1,
    n_concurrent_trials=2,
    datasets=[DatasetConfig(path="tasks/examples", task_names=["hello-file"])],
)
print(config.model_dump_json(indent=4))
