"""Free loopback ports for throwaway redis-servers: used by the tests (conftest.py) and, as a
script printing one port, by ./run's shell helpers (scripts/lib.sh)."""

from __future__ import annotations

import random
import socket


def free_port() -> int:
    """A loopback port nothing listens on now, chosen below the kernel's ephemeral range.

    Why not bind to port 0: that hands out ephemeral ports, which the client sockets of the
    tests also take as their local ports, so one can take the port between this probe and
    redis-server's own bind. Below the range only explicit binds take ports; RedisServer.start
    retries the remaining race (another probe) on a new port."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first_ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 0
    for _ in range(200):
        if first_ephemeral <= 10000:
            break
        port = random.randrange(10000, first_ephemeral)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    print(free_port())
