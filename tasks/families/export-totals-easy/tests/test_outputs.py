"""Checks for export-totals-easy: the one exact answer, read from a regular file."""

import os
import sys
import re

ANSWER = "/app/answer.txt"
EXPECTED = "14958.13"


def test_answer_is_a_regular_file():
    regular_file(ANSWER)


def test_answer_format():
    text = regular_file(ANSWER).decode("utf-8", "replace")
    assert re.fullmatch(r"-?[0-9]+\.[0-9]{2}\n?", text), f"not one number with two decimals: {text[:80]!r}"


def test_answer_value():
    text = regular_file(ANSWER).decode("utf-8", "replace").strip()
    assert text == EXPECTED, f"wrong total: {text[:80]!r}"


# --- Reporting (generated: tasks/families/generate.py) ---------------------------------------
def run_checks(namespace):
    """Runs every `test_*` function of `namespace` in order: [(name, passed, message)]."""
    records = []
    for name, fn in list(namespace.items()):
        if not (name.startswith("test_") and callable(fn)):
            continue
        try:
            fn()
            records.append((name, True, ""))
        except AssertionError as exc:
            records.append((name, False, "AssertionError: " + (str(exc) or "assertion failed")))
        except Exception as exc:  # a crashing check is a failed check
            records.append((name, False, f"{type(exc).__name__}: {exc}"))
    return records


def report(records, label="test_outputs.py"):
    """Prints the named checks, writes ctrf.json and reward.json (1 only when all passed)."""
    import json
    import time

    now = int(time.time() * 1000)
    tests = []
    for name, passed, message in records:
        test = {"name": f"{label}::{name}", "status": "passed" if passed else "failed", "duration": 0}
        if message:
            test["message"] = message[:2000]
        tests.append(test)
    passed = sum(1 for _, ok, _ in records if ok)
    print("=" * 30 + " short test summary info " + "=" * 30)
    for test in tests:
        line = f"{test['status'].upper()} {test['name']}"
        if test.get("message"):
            line += " - " + test["message"].splitlines()[0]
        print(line)
    print(f"{passed} passed, {len(records) - passed} failed")
    ctrf = {
        "results": {
            "tool": {"name": "runner-families"},
            "summary": {
                "tests": len(records),
                "passed": passed,
                "failed": len(records) - passed,
                "pending": 0,
                "skipped": 0,
                "other": 0,
                "start": now,
                "stop": now,
            },
            "tests": tests,
        }
    }
    os.makedirs("/logs/verifier", exist_ok=True)
    with open("/logs/verifier/ctrf.json", "w") as out:
        json.dump(ctrf, out, indent=2)
    reward = 1.0 if records and passed == len(records) else 0.0
    with open("/logs/verifier/reward.json", "w") as out:
        json.dump({"reward": reward}, out)
    print("reward:", reward)
    sys.exit(0 if reward == 1.0 else 1)


def regular_file(path):
    """The bytes of `path`, refusing anything but a regular file (a symlink scores 0)."""
    import stat

    info = os.lstat(path)
    assert not stat.S_ISLNK(info.st_mode), f"{path} is a symlink"
    assert stat.S_ISREG(info.st_mode), f"{path} is not a regular file"
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read()


if __name__ == "__main__":
    report(run_checks(globals()))
