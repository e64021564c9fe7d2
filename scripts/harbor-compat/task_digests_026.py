"""runner's task digests and task_checksums against Harbor 0.26's own code.

    python task_digests_026.py RUNNER PATH...     (with harbor==0.26.0 installed; Python >= 3.12)

For each PATH (a task or a dataset directory), `RUNNER tasks digest --format json` names every
task with its digest and directory; each digest must equal `sha256:` + 0.26's
`Packager.compute_content_hash` of that directory (`.harborignore` exclusions, the reference
`trajectory.json`, links to directories not entered). Exit 1 on any difference. (Each trial's
`task_checksum` is compared with 0.26's by harbor_026_read.py.)
"""

import json
import pathlib
import subprocess
import sys
import warnings

from harbor.publisher.packager import Packager

warnings.simplefilter("ignore", DeprecationWarning)
runner, paths = sys.argv[1], sys.argv[2:]
failures = 0
for path in paths:
    out = subprocess.run(
        [runner, "tasks", "digest", "--format", "json", path],
        check=True, capture_output=True, text=True,
    ).stdout
    for task in json.loads(out)["tasks"]:
        task_dir = pathlib.Path(task["path"])
        theirs = "sha256:" + Packager.compute_content_hash(task_dir)[0]
        if task["digest"] != theirs:
            print(f"FAIL {task['name']}: runner's digest {task['digest']}, Harbor 0.26's {theirs}")
            failures += 1
        else:
            print(f"ok   {task['name']}: digest equals Harbor 0.26's packager's")
sys.exit(1 if failures else 0)
