"""Checks for no-network: the answer, and that the container has no way out.

The egress checks send no packets anywhere: they read kernel state, and a UDP
connect() only consults the routing table (UDP has no handshake).
"""

import errno
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def test_sum_is_correct():
    with open("/app/sum.txt") as f:
        assert f.read().strip() == "5050", "sum.txt does not hold 5050"


def test_only_loopback_interface():
    interfaces = sorted(os.listdir("/sys/class/net"))
    assert interfaces == ["lo"], f"expected only lo, found {interfaces}"


def test_no_ipv4_routes():
    with open("/proc/net/route") as f:
        routes = [line for line in f.read().splitlines()[1:] if line.strip()]
    assert routes == [], f"unexpected IPv4 routes: {routes}"


def test_no_ipv6_routes_off_loopback():
    try:
        with open("/proc/net/ipv6_route") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return  # no IPv6 stack at all: nothing can leave over it
    # The last column is the device; the kernel keeps loopback and unreachable entries on lo.
    off_lo = [line for line in lines if line.split() and line.split()[-1] != "lo"]
    assert off_lo == [], f"unexpected IPv6 routes: {off_lo}"


def test_udp_connect_is_unreachable():
    # 192.0.2.1 is TEST-NET-1 (RFC 5737). UDP connect() sends nothing; it fails
    # with ENETUNREACH when there is no route, which is what we want to prove.
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect(("192.0.2.1", 9))
    except OSError as exc:
        assert exc.errno == errno.ENETUNREACH, f"expected ENETUNREACH, got {exc}"
    else:
        raise AssertionError("UDP connect to 192.0.2.1 succeeded: a route out exists")
    finally:
        sock.close()


if __name__ == "__main__":
    harness.main(globals())
