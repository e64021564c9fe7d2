"""Checks for slow-oracle: only passes if solve.sh ran to the end."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def test_answer_written():
    assert os.path.isfile("/app/answer.txt"), "/app/answer.txt does not exist"
    with open("/app/answer.txt") as f:
        assert f.read().strip() == "done", "answer.txt does not say done"


if __name__ == "__main__":
    harness.main(globals())
