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

REDIS_SERVER = os.environ.get("LOCKGATE_REDIS_SERVER", "redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        if shutil.which(REDIS_SERVER) is None and not os.path.exists(REDIS_SERVER):
            pytest.fail(f"{REDIS_SERVER} is not installed (ci.sh install installs it)")
        args = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
            "--daemonize", "no",
            *self.extra,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}")
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
