#!/bin/bash
set -euo pipefail
python3 - <<'PY'
EDITS = [
    ('/app/lib/intervals.py', 'start < merged[-1][1]', 'start <= merged[-1][1]'),
]
for path, old, new in EDITS:
    with open(path) as f:
        text = f.read()
    assert text.count(old) == 1, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new))
PY
