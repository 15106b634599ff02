"""Real redis-server processes for the tests: a free loopback port, data in a temp dir, no
persistence, stopped by pid. No mocks."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Callable, Iterator, Optional

import pytest
import redis

from ports import free_port

REDIS_SERVER = os.environ.get("LOCKGATE_REDIS_SERVER", "redis-server")


def wait_until(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """Polls `cond` until it is true; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


class RedisServer:
    """One redis-server owned by a test."""

    def __init__(self, extra: Optional[list[str]] = None) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="lockgate-py-redis-")
        self.extra = list(extra or [])
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.start()

    def start(self) -> None:
        """Starts redis-server on `self.port`. A server that exits at once (its port was taken
        between the probe and its bind) is started again on a new port."""
        if shutil.which(REDIS_SERVER) is None and not os.path.exists(REDIS_SERVER):
            pytest.fail(f"{REDIS_SERVER} is not installed (ci.sh install installs it)")
        failures = []
        for attempt in range(5):
            if attempt:
                self.port = free_port()
            why = self._try_start()
            if why is None:
                return
            failures.append(why)
        raise RuntimeError("redis-server did not start: " + "; ".join(failures))

    def _try_start(self) -> Optional[str]:
        """One start: None once the port accepts connections, else why not (with the log)."""
        log = os.path.join(self.dir, "redis.log")
        if os.path.exists(log):
            os.remove(log)
        args = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
            "--logfile", log,
            "--daemonize", "no",
            *self.extra,
        ]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    self.proc = proc
                    return None
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    tail = ""
                    if os.path.exists(log):
                        with open(log) as f:
                            tail = " | ".join(f.read().splitlines()[-3:])
                    return f"port {self.port}: {tail or 'no log'}"
                time.sleep(0.01)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def raw(self, **kw: object) -> "redis.Redis[bytes]":
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # by pid
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def acl_server(tmp_path: object) -> Iterator[RedisServer]:
    """A server where only user `app` with password `s3cret-pw` may log in."""
    d = tempfile.mkdtemp(prefix="lockgate-py-acl-")
    acl = os.path.join(d, "users.acl")
    with open(acl, "w") as f:
        f.write("user app on >s3cret-pw ~* &* +@all\nuser default off\n")
    s = RedisServer(["--aclfile", acl])
    try:
        yield s
    finally:
        s.close()
        shutil.rmtree(d, ignore_errors=True)


def queue_len(raw: "redis.Redis[bytes]", name: str, prefix: str = "lockgate:") -> int:
    return int(raw.zcard(f"{prefix}{{{name}}}:queue"))


def lock_key(name: str, prefix: str = "lockgate:") -> str:
    return f"{prefix}{{{name}}}"


# -------------------------------------------------------------------------------------------
# Deployments beyond one server: a 3-master Redis Cluster, a primary with one replica
# -------------------------------------------------------------------------------------------

# The slot ranges of the three masters (CLUSTER ADDSLOTSRANGE), as core/tests/support does.
CLUSTER_RANGES = ((0, 5460), (5461, 10922), (10923, 16383))


class RedisCluster:
    """Three cluster-enabled redis-servers (no replicas), slots split evenly, joined with
    CLUSTER MEET; each on free loopback ports with its own temp dir, stopped by pid."""

    def __init__(self) -> None:
        self.nodes: list[RedisServer] = []
        try:
            for _ in CLUSTER_RANGES:
                bus = free_port()
                node = RedisServer([
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf",  # relative to the node's --dir
                    "--cluster-port", str(bus),
                ])
                node.bus_port = bus  # type: ignore[attr-defined]
                self.nodes.append(node)
            for node, (lo, hi) in zip(self.nodes, CLUSTER_RANGES):
                node.raw().execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            first = self.nodes[0].raw()
            for other in self.nodes[1:]:
                first.execute_command("CLUSTER", "MEET", "127.0.0.1", other.port, other.bus_port)  # type: ignore[attr-defined]
            for node in self.nodes:
                raw = node.raw()

                def ready() -> bool:
                    info = raw.execute_command("CLUSTER", "INFO")
                    text = info.decode() if isinstance(info, bytes) else str(info)
                    return "cluster_state:ok" in text and "cluster_known_nodes:3" in text

                wait_until(ready, timeout=20, what=f"cluster_state:ok on port {node.port}")
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        """A seed URL (any node will do)."""
        return self.nodes[0].url

    def keyslot(self, key: str) -> int:
        return int(self.nodes[0].raw().execute_command("CLUSTER", "KEYSLOT", key))

    def owner(self, key: str) -> RedisServer:
        """The master that owns `key`'s slot."""
        slot = self.keyslot(key)
        for node, (lo, hi) in zip(self.nodes, CLUSTER_RANGES):
            if lo <= slot <= hi:
                return node
        raise AssertionError(f"slot {slot} of {key!r} is unassigned")

    def keys(self, pattern: str) -> list[tuple[int, str]]:
        """`(port, key)` for every key matching `pattern` on every node."""
        return sorted(
            (n.port, k.decode()) for n in self.nodes for k in n.raw().keys(pattern)
        )

    def close(self) -> None:
        for n in self.nodes:
            n.close()


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    """One cluster per test module (starting one takes ~1-2 s); tests use distinct lock names."""
    c = RedisCluster()
    try:
        yield c
    finally:
        c.close()


class ReplicatedRedis:
    """A primary and one replica (`--replicaof`), both on free loopback ports, stopped by pid;
    ready once the primary reports the replica online."""

    def __init__(self) -> None:
        # Diskless full sync without Redis's default 5 s wait for more replicas to join.
        self.primary = RedisServer(["--repl-diskless-sync-delay", "0"])
        try:
            self.replica = RedisServer(["--replicaof", "127.0.0.1", str(self.primary.port)])
        except BaseException:
            self.primary.close()
            raise
        raw = self.primary.raw()

        def online() -> bool:
            info = raw.info("replication")
            return int(info.get("connected_slaves", 0)) == 1 and "online" in str(info.get("slave0", ""))

        try:
            wait_until(online, timeout=10, what="the replica to come online")
        except BaseException:
            self.close()
            raise

    @property
    def replica_pid(self) -> int:
        assert self.replica.proc is not None
        return self.replica.proc.pid

    def close(self) -> None:
        self.replica.close()  # SIGKILL by pid ends a paused (SIGSTOP) replica too
        self.primary.close()


@pytest.fixture
def replicated() -> Iterator[ReplicatedRedis]:
    r = ReplicatedRedis()
    try:
        yield r
    finally:
        r.close()


# -------------------------------------------------------------------------------------------
# Redlock: N independent masters (no replication between them)
# -------------------------------------------------------------------------------------------


class RedisMasters:
    """`n` independent redis-servers for Redlock, each on a free loopback port with its own temp
    dir, stopped by pid. A fresh master refuses Redlock grants until it has been up for
    max_lease + 1 s (the delayed-restart rule, PROTOCOL.md §8): tests use a small `max_lease`
    and give their first acquire a few seconds."""

    def __init__(self, n: int) -> None:
        self.nodes: list[RedisServer] = []
        try:
            for _ in range(n):
                self.nodes.append(RedisServer())
        except BaseException:
            self.close()
            raise

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    @property
    def url(self) -> str:
        """The deployment as one client URL: `redlock://host:port,host:port,...`."""
        return "redlock://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def holders(self, name: str, prefix: str = "lockgate:") -> list[int]:
        """The ports of the running masters that hold Redlock `name`'s key."""
        key = redlock_key(name, prefix)
        return [n.port for n in self.nodes if n.proc is not None and n.raw().exists(key)]

    def close(self) -> None:
        for n in self.nodes:
            n.close()


def redlock_key(name: str, prefix: str = "lockgate:") -> str:
    """The key of Redlock `name` on every master (PROTOCOL.md §8)."""
    return f"{prefix}{{{name}}}:redlock"
