#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv
import json

with open("/app/orders.csv", newline="") as f:
    rows = list(csv.DictReader(f))
report = {
    "orders": len(rows),
    "total_quantity": sum(int(r["quantity"]) for r in rows),
    "revenue": round(sum(int(r["quantity"]) * float(r["unit_price"]) for r in rows), 2),
}
with open("/app/report.json", "w") as f:
    json.dump(report, f)
PY
