"""Grades fix-library-easy on a clean copy: only the library's source files from /app/lib (regular
files, no symlinks) beside the original tests of /tests, run by an isolated interpreter.
Each original test is one named check."""

import os
import sys

SOURCES = ['intervals.py']
ORIGINAL_TESTS = ['test_intervals.py']


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


# --- Grading on a clean copy (generated: tasks/families/generate.py) -------------------------
import ast
import shutil
import stat
import subprocess
import tempfile

LIB = "/app/lib"

# Runs in a fresh, isolated interpreter inside the clean copy: the original tests, the copied
# sources, nothing else on the path. Prints one JSON line of {test id: outcome}.
CHILD = r"""
import json, sys, unittest
clean = sys.argv[1]
sys.path[:0] = [clean + "/lib", clean + "/tests"]
outcomes = {}
class Result(unittest.TestResult):
    def addSuccess(self, test):
        outcomes[test.id()] = ("passed", "")
    def addFailure(self, test, err):
        outcomes[test.id()] = ("failed", self._exc_info_to_string(err, test))
    def addError(self, test, err):
        outcomes[test.id()] = ("failed", self._exc_info_to_string(err, test))
suite = unittest.defaultTestLoader.discover(clean + "/tests", pattern="test_*.py", top_level_dir=clean + "/tests")
suite.run(Result())
sys.stdout.write("\nOUTCOMES " + json.dumps(outcomes) + "\n")
"""


def expected_tests():
    """Test ids of the original tests, read without running them: module.Class.method."""
    ids = []
    for name in ORIGINAL_TESTS:
        with open(os.path.join("/tests", name)) as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                        ids.append(f"{name[:-3]}.{node.name}.{item.name}")
    return ids


def grade():
    records = []
    clean = tempfile.mkdtemp(prefix="clean-")
    os.makedirs(os.path.join(clean, "lib"))
    os.makedirs(os.path.join(clean, "tests"))
    problems = []
    for name in SOURCES:
        try:
            data = regular_file(os.path.join(LIB, name))
        except (AssertionError, OSError) as exc:
            problems.append(str(exc))
            continue
        with open(os.path.join(clean, "lib", name), "wb") as f:
            f.write(data)
    records.append(("library_sources_are_regular_files", not problems, "; ".join(problems)))
    for name in ORIGINAL_TESTS:
        shutil.copyfile(os.path.join("/tests", name), os.path.join(clean, "tests", name))
    outcomes = {}
    try:
        run = subprocess.run(
            ["/usr/bin/python3", "-I", "-S", "-B", "-c", CHILD, clean],
            cwd=clean,
            env={"PATH": "/usr/bin:/bin", "HOME": clean, "LANG": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
        )
        import json

        for line in run.stdout.splitlines():
            if line.startswith("OUTCOMES "):
                outcomes = json.loads(line[len("OUTCOMES "):])
        if not outcomes:
            print(run.stdout[-4000:], run.stderr[-4000:], sep="\n")
    except subprocess.TimeoutExpired:
        print("the original tests did not finish in 30 s")
    for test_id in expected_tests():
        status, message = outcomes.get(test_id, ("failed", "did not run (the library did not import?)"))
        lines = message.strip().splitlines()
        if len(lines) > 1:  # a traceback: its last line (the assertion) first
            message = lines[-1] + "\n" + message
        records.append((test_id, status == "passed", message))
    shutil.rmtree(clean, ignore_errors=True)
    return records


if __name__ == "__main__":
    report(grade())
