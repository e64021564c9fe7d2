"""Checks for multi-reward, scored into several rewards.

reward.json keys:
- reward:      1.0 only when every check passed (the headline score),
- correctness: fraction of the value checks that passed,
- format:      1.0 when report.json is a JSON object with exactly the expected keys.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

REPORT = "/app/report.json"
# Expected values for environment/orders.csv.
EXPECTED = {"orders": 5, "total_quantity": 15, "revenue": 29.0}
VALUE_CHECKS = ["test_orders", "test_total_quantity", "test_revenue"]


def load_report():
    with open(REPORT) as f:
        return json.load(f)


def test_report_format():
    report = load_report()
    assert isinstance(report, dict), "report.json is not a JSON object"
    assert sorted(report) == sorted(EXPECTED), f"keys are {sorted(report)}, expected {sorted(EXPECTED)}"


def test_orders():
    assert load_report().get("orders") == EXPECTED["orders"], "wrong orders count"


def test_total_quantity():
    assert load_report().get("total_quantity") == EXPECTED["total_quantity"], "wrong total_quantity"


def test_revenue():
    revenue = load_report().get("revenue")
    assert isinstance(revenue, (int, float)), "revenue is not a number"
    assert abs(revenue - EXPECTED["revenue"]) < 0.005, f"revenue {revenue} != {EXPECTED['revenue']}"


if __name__ == "__main__":
    results = harness.run_tests(globals())
    rewards = {
        "reward": 1.0 if all(results.values()) else 0.0,
        "correctness": round(sum(results[name] for name in VALUE_CHECKS) / len(VALUE_CHECKS), 4),
        "format": 1.0 if results["test_report_format"] else 0.0,
    }
    with open("/logs/verifier/reward.json", "w") as f:
        json.dump(rewards, f)
    print("rewards:", json.dumps(rewards))
    sys.exit(0 if rewards["reward"] == 1.0 else 1)
