"""Every bad input maps to the right exception class; no repr or message shows a password."""

from __future__ import annotations

import asyncio
import math
import os
from typing import Any

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer, free_port, lock_key

CLASSES = {
    "INVALID_ARGUMENT": (lockgate.InvalidArgumentError, False),
    "TIMEOUT": (lockgate.LockTimeoutError, True),
    "NOT_HELD": (lockgate.NotHeldError, False),
    "CONNECTION": (lockgate.LockConnectionError, True),
    "AUTHENTICATION": (lockgate.AuthenticationError, False),
    "PROTOCOL": (lockgate.ProtocolError, False),
    "CANCELLED": (lockgate.LockCancelledError, False),
    "CLOSED": (lockgate.ClientClosedError, False),
    "UNSUPPORTED": (lockgate.UnsupportedError, False),
}


def test_one_class_per_core_code() -> None:
    for code, (cls, retryable) in CLASSES.items():
        assert issubclass(cls, lockgate.LockError)
        assert cls.code == code and cls.retryable is retryable
        assert cls.__module__ == "lockgate" and cls.__doc__
    assert issubclass(lockgate.LockTimeoutError, TimeoutError)
    assert issubclass(lockgate.InvalidArgumentError, ValueError)
    assert not issubclass(lockgate.NotHeldError, (TimeoutError, ValueError))
    names = {c.__name__ for c, _ in CLASSES.values()}
    assert names <= set(lockgate.__all__)


BAD_SECONDS = [0.0, -1.0, math.nan, math.inf, -math.inf, 1e12, 0.005]


@pytest.mark.parametrize(
    "url", ["", "http://127.0.0.1", "redis://", "redis://127.0.0.1:1/notadb", "not a url",
            "redis://127.0.0.1/?foo=1"],
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(lockgate.InvalidArgumentError) as ei:
        lockgate.Client(url)
    assert isinstance(ei.value, ValueError) and ei.value.code == "INVALID_ARGUMENT"
    assert ei.value.retryable is False
    with pytest.raises(lockgate.InvalidArgumentError):
        lockgate.aio.Client(url)


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf, 1e12])
def test_bad_client_timeouts(server: RedisServer, value: float) -> None:
    for kw in ("connect_timeout", "response_timeout"):
        with pytest.raises(lockgate.InvalidArgumentError):
            lockgate.Client(server.url, **{kw: value})
        with pytest.raises(lockgate.InvalidArgumentError):
            lockgate.aio.Client(server.url, **{kw: value})


def test_bad_client_options(server: RedisServer, tmp_path: Any) -> None:
    for cls in (lockgate.Client, lockgate.aio.Client):
        with pytest.raises(lockgate.InvalidArgumentError):
            cls(server.url, key_prefix="a{b")
        with pytest.raises(lockgate.InvalidArgumentError):
            cls(server.url, key_prefix="x" * 129)
        with pytest.raises(FileNotFoundError):
            cls(server.url.replace("redis:", "rediss:"), tls_ca_file=str(tmp_path / "nope.pem"))
        pem = tmp_path / "ca.pem"
        pem.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
        with pytest.raises(lockgate.InvalidArgumentError):
            cls(server.url, tls_ca_file=pem)  # a CA for plaintext redis://
        # Client options go to the core's one setter: a wrong type is a bad value there, named.
        with pytest.raises(lockgate.InvalidArgumentError, match="connect_timeout must be a number of seconds"):
            cls(server.url, connect_timeout="5")
        with pytest.raises(lockgate.InvalidArgumentError, match="unknown client option \"connectTimeout\""):
            cls(server.url, connectTimeout=5)
        with pytest.raises(TypeError):
            cls(server.url, connect_timeout=[5])
        with pytest.raises(TypeError):
            cls(42)  # type: ignore[arg-type]


def test_bad_lock_arguments(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    aclient = lockgate.aio.Client(server.url)
    for make in (client.lock, aclient.lock):
        for name in ["", "n" * 513]:
            with pytest.raises(lockgate.InvalidArgumentError):
                make(name)
        for s in BAD_SECONDS:
            with pytest.raises(lockgate.InvalidArgumentError):
                make("x", s)
        for s in [-1.0, math.nan, math.inf, 1e12]:
            with pytest.raises(lockgate.InvalidArgumentError):
                make("x", wait=s)
        for s in [0.0, 0.05, -1.0, math.nan]:
            with pytest.raises(lockgate.InvalidArgumentError):
                make("x", entry_ttl=s)
        with pytest.raises(TypeError):
            make(123)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            make("x", "30")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            make("x", 30, True)  # type: ignore[misc]  # renew is keyword-only
    assert not server.raw().keys("*"), "no bad input reached the server"


def test_bad_acquire_and_extend_arguments(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    lock = client.lock("x")
    for s in [-1.0, math.nan, math.inf, 1e12]:
        with pytest.raises(lockgate.InvalidArgumentError):
            lock.acquire(timeout=s)
    lease = lock.acquire(timeout=1)
    for s in BAD_SECONDS:
        with pytest.raises(lockgate.InvalidArgumentError):
            lease.extend(s)
    assert lease.is_held
    lease.release()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as ac:
            alock = ac.lock("y")
            for s in [-1.0, math.nan, math.inf, 1e12]:
                with pytest.raises(lockgate.InvalidArgumentError):
                    alock.acquire(timeout=s)
            alease = await alock.acquire(timeout=1)
            for s in BAD_SECONDS:
                with pytest.raises(lockgate.InvalidArgumentError):
                    alease.extend(s)
            assert await alease.release() is True

    asyncio.run(main())


def test_zero_timeout_on_a_held_lock_is_a_timeout(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    held = client.lock("z").acquire(timeout=1)
    with pytest.raises(lockgate.LockTimeoutError):
        lockgate.Client(server.url).lock("z").acquire(timeout=0)
    held.release()


def test_unreachable_server_is_a_connection_error() -> None:
    url = f"redis://127.0.0.1:{free_port()}"
    with pytest.raises(lockgate.LockConnectionError) as ei:
        lockgate.Client(url, connect_timeout=1)
    assert ei.value.retryable is True and ei.value.code == "CONNECTION"


def test_connect_timeout_bounds_the_whole_connect() -> None:
    """A server that accepts TCP and never answers (a hung proxy): connect_timeout=1 fails in about
    1 s, not once per attempt (issue 13, item 8: it took 3.5 s)."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(lockgate.LockConnectionError) as ei:
            lockgate.Client(url, connect_timeout=1)
        took = time.monotonic() - started
    assert ei.value.retryable is True
    assert 0.9 <= took < 1.8, f"took {took:.2f} s"


def test_wrong_key_type_is_a_protocol_error(server: RedisServer) -> None:
    server.raw().hset(lock_key("wt"), "f", "v")
    client = lockgate.Client(server.url)
    with pytest.raises(lockgate.ProtocolError) as ei:
        client.lock("wt").try_acquire()
    assert ei.value.code == "PROTOCOL"


def test_authentication_and_repr_hide_the_password(acl_server: RedisServer) -> None:
    port = acl_server.port
    good = f"redis://app:s3cret-pw@127.0.0.1:{port}"
    client = lockgate.Client(good)
    aclient = lockgate.aio.Client(good)
    for shown in (repr(client), str(client), client.url, repr(aclient), aclient.url):
        assert "s3cret-pw" not in shown, shown
        assert "app:***@" in shown, shown
    lock = client.lock("acl")
    lease = lock.acquire(timeout=1)
    for shown in (repr(lock), repr(lease)):
        assert "s3cret-pw" not in shown
    assert lease.release() is True

    for cls_url in (f"redis://app:wrong-pw@127.0.0.1:{port}", f"redis://127.0.0.1:{port}"):
        with pytest.raises(lockgate.AuthenticationError) as ei:
            lockgate.Client(cls_url)
        assert ei.value.retryable is False and ei.value.code == "AUTHENTICATION"
        assert "wrong-pw" not in str(ei.value) and "wrong-pw" not in repr(ei.value)

    async def main() -> None:
        bad = lockgate.aio.Client(f"redis://app:wrong-pw@127.0.0.1:{port}")
        assert "wrong-pw" not in repr(bad)
        with pytest.raises(lockgate.AuthenticationError) as ei:
            await bad.connect()
        assert "wrong-pw" not in str(ei.value)

    asyncio.run(main())
    # A password with URL escapes is hidden too, and malformed URLs never echo it.
    with pytest.raises(lockgate.InvalidArgumentError) as ei2:
        lockgate.Client("redis://u:hunter%402@127.0.0.1:99999")
    assert "hunter" not in str(ei2.value)


def test_docstrings_on_every_public_name() -> None:
    import lockgate.aio as aio

    for mod in (lockgate, aio):
        assert mod.__doc__
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, str) or name == "aio":
                continue
            assert obj.__doc__, f"{mod.__name__}.{name} has no docstring"
            for attr, member in vars(obj).items():
                if attr.startswith("_") or attr in ("code", "retryable"):
                    continue
                assert getattr(member, "__doc__", None), f"{name}.{attr} has no docstring"


def test_the_package_ships_its_stubs() -> None:
    pkg = os.path.dirname(lockgate.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    assert os.path.exists(os.path.join(pkg, "_lockgate.pyi"))


def test_unencodable_and_huge_values_are_invalid_arguments(server: RedisServer) -> None:
    """A lone surrogate or an integer no machine type holds is a bad value like any other:
    InvalidArgumentError at the call, not UnicodeEncodeError or OverflowError."""
    huge = 10**30
    huger = 10**400  # too large even for a float
    client = lockgate.Client(server.url)
    lock = client.lock("typed")
    lease = lock.acquire(timeout=1)

    def sync_calls() -> list[Any]:
        return [
            lambda: lockgate.Client("redis://127.0.0.1:1/\ud800"),
            lambda: lockgate.Client(server.url, key_prefix="\ud800"),
            lambda: lockgate.Client(server.url, connect_timeout=huger),
            lambda: lockgate.Client(server.url, response_timeout=-huger),
            lambda: lockgate.Client(server.url, replica_acks=huge),
            lambda: lockgate.Client(server.url, replica_acks=-huge),
            lambda: client.lock("\ud800"),
            lambda: client.lock("x", huger),
            lambda: client.lock("x", huge),
            lambda: client.lock("x", wait=huger),
            lambda: client.lock("x", entry_ttl=huge),
            lambda: client.semaphore("x", huge),
            lambda: client.semaphore("x", -huge),
            lambda: client.read_write_lock("\udfff"),
            lambda: client.election("\ud800"),
            lambda: client.election("e").campaign("\ud800", timeout=1),
            lambda: client.election("e").try_campaign("\ud800"),
            lambda: lock.acquire(timeout=huger),
            lambda: lease.extend(huger),
            lambda: lock.extend(huge),
            lambda: lockgate.Client("redlock://127.0.0.1:1,\ud800"),
            lambda: lockgate.Client(f"redlock://127.0.0.1:{server.port}", max_lease=huger),
        ]

    for call in sync_calls():
        with pytest.raises(lockgate.InvalidArgumentError):
            call()
    aclient = lockgate.aio.Client(server.url)
    for call in [
        lambda: lockgate.aio.Client("\ud800"),
        lambda: lockgate.aio.Client(server.url, replica_acks=huge),
        lambda: aclient.lock("\ud800"),
        lambda: aclient.lock("x", huger),
        lambda: aclient.semaphore("x", huge),
        lambda: aclient.election("x").campaign("\ud800"),
        lambda: aclient.lock("x").acquire(timeout=huger),
        lambda: lockgate.aio.Client("redlock://\ud800"),
    ]:
        with pytest.raises(lockgate.InvalidArgumentError):
            call()
    assert lease.release() is True
    # Wrong types stay TypeErrors.
    with pytest.raises(TypeError):
        client.lock(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.semaphore("x", 1.5)  # type: ignore[arg-type]


def test_on_lost_rejects_a_non_callable_at_the_call(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    lease = client.lock("cb").acquire(timeout=1)
    with pytest.raises(TypeError):
        lease.on_lost(42)  # type: ignore[arg-type]
    assert lease.release() is True

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as aclient:
            alease = await aclient.lock("cb").acquire(timeout=1)
            with pytest.raises(TypeError):
                alease.on_lost("not callable")  # type: ignore[arg-type]
            assert await alease.release() is True

    asyncio.run(main())


def test_a_user_without_a_password_is_rejected(server: RedisServer) -> None:
    """`redis://user@host` would silently run as the `default` user: refused before connecting."""
    for url in ("redis://user@127.0.0.1:1", f"redis://app@127.0.0.1:{server.port}"):
        with pytest.raises(lockgate.InvalidArgumentError):
            lockgate.Client(url)
        with pytest.raises(lockgate.InvalidArgumentError):
            lockgate.aio.Client(url)


def test_option_errors_name_the_option_in_seconds(server: RedisServer) -> None:
    """Each message names the argument as the Python caller spelled it, in seconds."""
    client = lockgate.Client(server.url)
    lock = client.lock("units")
    lease = lock.acquire(timeout=1)
    cases: list[tuple[Any, str, str]] = [
        (lambda: client.lock("x", 0.001), "lease", "0.01 s"),
        (lambda: client.lock("x", 3e9), "lease", "2592000 s"),
        (lambda: client.lock("x", entry_ttl=0.01), "entry_ttl", "0.1 s"),
        (lambda: client.lock("x", min_hold=0.005), "min_hold", "0.01 s"),
        (lambda: client.semaphore("x", 2, max_hold=-1), "max_hold", "-1 s"),
        (lambda: client.election("x", min_hold=2, max_hold=1), "min_hold", "2 s"),
        (lambda: client.lock("x", wait=-1), "wait", "-1 s"),
        (lambda: lease.extend(0.001), "seconds", "0.01 s"),
        (lambda: lock.extend(0.001), "seconds", "0.01 s"),
        (lambda: lockgate.Client(f"redlock://127.0.0.1:{server.port}", max_lease=0.001), "max_lease", "0.01 s"),
        (lambda: lockgate.Client(server.url, response_timeout=-2), "response_timeout", "-2 s"),
    ]
    for call, name, unit in cases:
        with pytest.raises(lockgate.InvalidArgumentError) as ei:
            call()
        message = str(ei.value)
        assert message.startswith(name + " "), message
        assert unit in message and "ms" not in message, message
    assert lease.release() is True
