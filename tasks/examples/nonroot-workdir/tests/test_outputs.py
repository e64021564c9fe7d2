"""Checks for nonroot-workdir: the file is in the workdir, owned by and naming the agent user."""

import os
import pwd
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RESULT = "/srv/work/result.txt"


def test_result_exists():
    assert os.path.isfile(RESULT), f"{RESULT} does not exist"


def test_owned_by_agent():
    owner = pwd.getpwuid(os.stat(RESULT).st_uid).pw_name
    assert owner == "agent", f"{RESULT} is owned by {owner}, not agent"


def test_content_names_agent():
    with open(RESULT) as f:
        content = f.read()
    assert content.strip() == "agent", f"expected 'agent', found {content!r}"


if __name__ == "__main__":
    harness.main(globals())
