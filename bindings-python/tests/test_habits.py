"""What a user coming from redis-py or another backend reads into an API (issue 23, items 9
and 12): `timeout=` on a handle factory is refused, pointing at `lease=`; a client shows only
the options its backend has."""

from __future__ import annotations

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer


def test_timeout_on_a_factory_is_refused_pointing_at_lease(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    for factory in (
        lambda: client.lock("x", timeout=10),  # type: ignore[arg-type]
        lambda: client.semaphore("x", 2, timeout=10),  # type: ignore[arg-type]
        lambda: client.read_write_lock("x", timeout=10),  # type: ignore[arg-type]
        lambda: lockgate.aio.Client(server.url).lock("x", timeout=10),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError) as ei:
            factory()
        message = str(ei.value)
        assert "lease=" in message and "acquire(timeout=" in message, message
    # The handle's default wait has its own name; acquire(timeout=) is the wait, as before.
    lock = client.lock("x", 10.0, wait=2)
    assert lock.wait == 2.0 and lock.lease == 10.0
    assert "wait=2.0" in repr(lock)
    lease = lock.acquire(timeout=1)
    assert lease.release() is True
    client.close()


def test_a_client_shows_only_the_options_its_backend_has(server: RedisServer) -> None:
    redis_client = lockgate.aio.Client(server.url)
    assert "key_prefix='lockgate:'" in repr(redis_client) and redis_client.key_prefix == "lockgate:"
    for url in ("zookeeper://127.0.0.1:2181", "etcd://127.0.0.1:2379", "postgres://u@127.0.0.1:5432/db"):
        c = lockgate.aio.Client(url)  # validates only; connects on first use
        assert "key_prefix" not in repr(c), repr(c)
        assert c.key_prefix is None
        assert url.split("://")[0] in repr(c)


def test_the_client_docstring_and_package_name_every_backend() -> None:
    from importlib import metadata

    doc = lockgate.Client.__doc__ or ""
    summary = metadata.metadata("lockgate")["Summary"]
    for scheme, name in (("redis://", "Redis"), ("redis+cluster://", "Redis Cluster"), ("redlock://", "Redlock"),
                         ("zookeeper://", "ZooKeeper"), ("etcd://", "etcd"), ("postgres://", "PostgreSQL"),
                         ("mysql://", "MySQL")):
        assert scheme in doc, scheme
        assert name in summary, (name, summary)
