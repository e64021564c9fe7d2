"""Harbor 0.26's `task_checksum` of task directories, computed by Harbor's own code
(`harbor.models.task.task.Task.checksum`, the value 0.26 writes into a trial's result.json).

    python task_checksum.py TASK_DIR...      (with harbor==0.26.0 installed; Python >= 3.12)

Prints `<checksum>  <task dir>` per task. Used to make the fixture values of
tasks/src/checksum.rs's tests, and by scripts/harbor-compat.sh to compare every trial's
`task_checksum` runner wrote with Harbor's.
"""

import sys
import warnings

from harbor.models.task.task import Task

warnings.simplefilter("ignore", DeprecationWarning)
for task_dir in sys.argv[1:]:
    print(f"{Task(task_dir).checksum}  {task_dir}")
