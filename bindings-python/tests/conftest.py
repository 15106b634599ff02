"""Real redis-servers for the tests, from the project's one test-server launcher
(`target/release/test-servers`, conformance/README.md): free loopback ports, data in temp dirs,
no persistence; stopping, restarting and pausing a server go through the launcher, which stops
exactly the servers it started when its stdin closes. No mocks."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import redis

from ports import free_port

__all__ = ["free_port"]  # re-exported for the tests

LAUNCHER = os.environ.get("LOCKGATE_TEST_SERVERS") or str(Path(__file__).resolve().parents[2] / "target/release/test-servers")


def wait_until(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """Polls `cond` until it is true; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


class Deployment:
    """The servers of one launcher process (`kind`: single, acl, replica, cluster, redlock)."""

    def __init__(self, kind: str, *args: str) -> None:
        if not os.path.exists(LAUNCHER):
            pytest.fail(f"{LAUNCHER} is missing: cargo build --release -p lockgate-conformance (ci.sh test does)")
        self.proc = subprocess.Popen([LAUNCHER, kind, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"test-servers {kind} did not start (exit status {self.proc.returncode})")
        self.info: dict[str, Any] = json.loads(line)
        self.nodes = [RedisServer(self, i, n) for i, n in enumerate(self.info["nodes"])]

    @property
    def url(self) -> str:
        return str(self.info["url"])

    def command(self, line: str) -> dict[str, Any]:
        """One launcher command (`stop I`, `pause I`, ...); its reply, which must be `ok`."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply: dict[str, Any] = json.loads(self.proc.stdout.readline())
        if not reply.get("ok"):
            raise RuntimeError(f"test-servers {line!r}: {reply}")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the launcher stops its servers, by pid
            self.proc.wait(timeout=30)


class RedisServer:
    """One server of a deployment."""

    def __init__(self, deployment: Deployment, index: int, info: dict[str, Any]) -> None:
        self.deployment, self.index, self.port, self.running = deployment, index, int(info["port"]), True
        self.info = info

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def raw(self, **kw: Any) -> "redis.Redis[bytes]":
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def stop(self) -> None:
        self.deployment.command(f"stop {self.index}")
        self.running = False

    def pause(self) -> None:
        self.deployment.command(f"pause {self.index}")

    def resume(self) -> None:
        self.deployment.command(f"resume {self.index}")

    def close(self) -> None:
        self.deployment.close()


@pytest.fixture
def server() -> Iterator[RedisServer]:
    d = Deployment("single")
    try:
        yield d.nodes[0]
    finally:
        d.close()


@pytest.fixture
def acl_server() -> Iterator[RedisServer]:
    """A server where only user `app` with password `s3cret-pw` may log in."""
    d = Deployment("acl")
    try:
        yield d.nodes[0]
    finally:
        d.close()


def queue_len(raw: "redis.Redis[bytes]", name: str, prefix: str = "lockgate:") -> int:
    return int(raw.zcard(f"{prefix}{{{name}}}:queue"))


def lock_key(name: str, prefix: str = "lockgate:") -> str:
    return f"{prefix}{{{name}}}"


class RedisCluster(Deployment):
    """Three cluster masters (no replicas), slots split evenly."""

    def __init__(self) -> None:
        super().__init__("cluster")

    @property
    def url(self) -> str:
        """A seed node's `redis://` URL (any node will do; `cluster_url` is `redis+cluster://`)."""
        return self.nodes[0].url

    @property
    def cluster_url(self) -> str:
        return str(self.info["url"])

    def owner(self, key: str) -> RedisServer:
        """The master that owns `key`'s slot."""
        slot = int(self.nodes[0].raw().execute_command("CLUSTER", "KEYSLOT", key))
        for node in self.nodes:
            lo, hi = node.info["slots"]
            if lo <= slot <= hi:
                return node
        raise AssertionError(f"slot {slot} of {key!r} is unassigned")

    def keys(self, pattern: str) -> list[tuple[int, str]]:
        """`(port, key)` for every key matching `pattern` on every node."""
        return sorted((n.port, k.decode()) for n in self.nodes for k in n.raw().keys(pattern))


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    """One cluster per test module; tests use distinct lock names."""
    c = RedisCluster()
    try:
        yield c
    finally:
        c.close()


class ReplicatedRedis(Deployment):
    """A primary and one replica, online."""

    def __init__(self) -> None:
        super().__init__("replica")
        self.primary, self.replica = self.nodes


@pytest.fixture
def replicated() -> Iterator[ReplicatedRedis]:
    r = ReplicatedRedis()
    try:
        yield r
    finally:
        r.close()


class RedisMasters(Deployment):
    """`n` independent masters for Redlock (`url`: `redlock://...`). A fresh master refuses
    Redlock grants until it has been up for max_lease + 1 s (the delayed-restart rule,
    PROTOCOL.md §8): tests use a small `max_lease` and give their first acquire a few seconds."""

    def __init__(self, n: int) -> None:
        super().__init__("redlock", "--masters", str(n))

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def wait_all_granting(self, max_lease: float, timeout: float = 10.0) -> None:
        """Waits until every master is past the delayed-restart rule (up for `max_lease` + 1 s,
        counted in INFO's whole seconds). A majority grants before the last of five staggered
        masters does, and a key that master refused never lands there (seen on a loaded machine)."""
        needed = math.ceil(max_lease + 1)
        wait_until(
            lambda: all(int(n.raw().info("server")["uptime_in_seconds"]) >= needed for n in self.nodes if n.running),
            timeout,
            f"every master up for {needed} s",
        )

    def wait_all_hold(self, name: str, timeout: float = 2.0) -> None:
        """Waits until every running master holds Redlock `name`'s key: an acquire returns once
        a majority granted (PROTOCOL.md §8), and the other masters' grants land just after it."""
        running = sum(1 for n in self.nodes if n.running)
        wait_until(lambda: len(self.holders(name)) == running, timeout, f"every running master to hold {name!r}")

    def holders(self, name: str, prefix: str = "lockgate:") -> list[int]:
        """The ports of the running masters that hold Redlock `name`'s key."""
        key = redlock_key(name, prefix)
        return [n.port for n in self.nodes if n.running and n.raw().exists(key)]


def redlock_key(name: str, prefix: str = "lockgate:") -> str:
    """The key of Redlock `name` on every master (PROTOCOL.md §8)."""
    return f"{prefix}{{{name}}}:redlock"
