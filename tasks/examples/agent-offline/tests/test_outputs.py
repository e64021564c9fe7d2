"""Checks for agent-offline: the agent saw loopback only; the verifier has a network.

Nothing is sent anywhere: the checks read kernel state (interfaces, routing tables).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def routes(text):
    return [line.split() for line in text.splitlines()[1:] if line.strip()]


def test_the_agent_saw_only_loopback():
    with open("/app/interfaces.txt") as f:
        assert f.read().split() == ["lo"], "the agent had an interface besides lo"


def test_the_agent_had_no_routes():
    with open("/app/routes.txt") as f:
        text = f.read()
    assert text.startswith("Iface"), "routes.txt is not a copy of /proc/net/route"
    assert routes(text) == [], f"the agent had routes: {routes(text)}"


def test_the_verifier_has_an_interface_and_a_default_route():
    assert sorted(os.listdir("/sys/class/net")) != ["lo"], "the verifier has only lo"
    with open("/proc/net/route") as f:
        table = routes(f.read())
    assert any(r[1] == "00000000" for r in table), f"no default route: {table}"


if __name__ == "__main__":
    harness.main(globals())
