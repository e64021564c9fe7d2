"""Checks for compose-sidecar: the token came from the sidecar, which the verifier asks again."""

import http.client
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def served_token():
    conn = http.client.HTTPConnection("keeper", 8080, timeout=10)
    conn.request("GET", "/token")
    return conn.getresponse().read().decode()


def test_token_matches_the_sidecar():
    with open("/app/token.txt") as f:
        assert f.read().strip() == served_token(), "token.txt is not the sidecar's token"


def test_the_named_volume_is_shared_with_the_sidecar():
    with open("/shared/token.txt") as f:
        assert f.read().strip() == served_token(), "/shared is not the sidecar's volume"


if __name__ == "__main__":
    harness.main(globals())
