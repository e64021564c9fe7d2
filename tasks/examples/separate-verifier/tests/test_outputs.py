"""Checks for separate-verifier: the artifacts arrived; nothing else of the agent's did."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def test_the_sum_artifact_arrived():
    with open("/logs/artifacts/sum.txt") as f:
        assert f.read().strip() == "5050", "sum.txt does not hold 5050"


def test_the_declared_artifact_arrived():
    with open("/app/report.txt") as f:
        assert "numbers" in f.read(), "report.txt was not copied"


def test_the_decoy_did_not():
    assert not os.path.exists("/app/decoy.txt"), "the agent's decoy reached the verifier"


def test_this_is_not_the_agents_image():
    assert not os.path.exists("/app/numbers.txt"), "the verifier runs in the agent's image"


if __name__ == "__main__":
    harness.main(globals())
