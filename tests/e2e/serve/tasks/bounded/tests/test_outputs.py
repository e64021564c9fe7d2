"""Checks for hello-file."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

HELLO_PATH = os.environ.get("HELLO_PATH", "/app/hello.txt")


def test_file_exists():
    assert os.path.isfile(HELLO_PATH), f"{HELLO_PATH} does not exist"


def test_file_content():
    with open(HELLO_PATH) as f:
        content = f.read()
    assert content.strip() == "Hello, world!", f"unexpected content {content!r}"


if __name__ == "__main__":
    harness.main(globals())
