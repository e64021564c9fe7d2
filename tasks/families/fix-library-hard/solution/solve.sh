#!/bin/bash
set -euo pipefail
python3 - <<'PY'
EDITS = [
    ('/app/lib/daycount.py', 'return year % 4 == 0 and year % 100 != 0', 'return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)'),
    ('/app/lib/billing.py', '    total = day.month + months\n    year = day.year + total // 12\n    month = total % 12 or 12\n', '    index = day.month - 1 + months\n    year = day.year + index // 12\n    month = index % 12 + 1\n'),
]
for path, old, new in EDITS:
    with open(path) as f:
        text = f.read()
    assert text.count(old) == 1, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new))
PY
