"""`cluster=True` (or a `redis+cluster://` URL) against a real three-master Redis Cluster from
the test-server launcher: each lock's commands reach the master that owns its slot, in both APIs; without
the flag, other masters redirect. Handoffs, semaphores and read-write locks on a cluster are the
conformance scenarios' (the cluster variant)."""

from __future__ import annotations

import asyncio

import pytest

import lockgate
import lockgate.aio
from conftest import RedisCluster


def names_on_every_master(cluster: RedisCluster, stem: str) -> list[str]:
    """One lock name per master (`stem-0`, `stem-1`, ... until every slot range is hit)."""
    by_master: dict[int, str] = {}
    i = 0
    while len(by_master) < len(cluster.nodes):
        name = f"{stem}-{i}"
        by_master.setdefault(cluster.owner(f"lockgate:{{{name}}}").port, name)
        i += 1
    return [by_master[n.port] for n in cluster.nodes]


def live_keys(cluster: RedisCluster, name: str) -> list[tuple[int, str]]:
    """`(port, key)` of every key of lock `name` on any node, except fence counters."""
    return [(p, k) for p, k in cluster.keys(f"lockgate:{{{name}}}*") if not k.endswith(":fence")]


def test_mutexes_on_every_master(redis_cluster: RedisCluster) -> None:
    names = names_on_every_master(redis_cluster, "orders")
    owners = [redis_cluster.owner(f"lockgate:{{{n}}}").port for n in names]
    assert len(set(owners)) == 3, "the names must span the three masters"
    with lockgate.Client(redis_cluster.url, cluster=True) as client:
        locks = [client.lock(n, wait=5) for n in names]
        leases = [lock.acquire() for lock in locks]  # all held at once, on three masters
        for name, owner, lease in zip(names, owners, leases):
            assert lease.is_held and lease.fencing_token >= 1
            # The lock key (and the waiters hash carrying the holder's label, PROTOCOL.md §12)
            # lives on the master that owns its slot, and nowhere else.
            assert sorted(live_keys(redis_cluster, name)) == [(owner, f"lockgate:{{{name}}}"), (owner, f"lockgate:{{{name}}}:waiters")]
            assert lock_is_busy(client, name)
        for lease in leases:
            assert lease.release() is True
        for name in names:
            assert live_keys(redis_cluster, name) == []
        # A second round: fencing tokens keep increasing per lock on each master.
        for lock, before in zip(locks, leases):
            with lock.acquire(timeout=5) as again:
                assert again.fencing_token > before.fencing_token


def lock_is_busy(client: lockgate.Client, name: str) -> bool:
    """Whether another handle on the same client sees `name` as taken."""
    other = client.lock(name).try_acquire()
    if other is None:
        return True
    other.release()
    return False


def test_asyncio_client_on_a_cluster(redis_cluster: RedisCluster) -> None:
    names = names_on_every_master(redis_cluster, "aio")

    async def main() -> None:
        # The cluster as a URL scheme (the same as `cluster=True` on a redis:// URL).
        url = redis_cluster.cluster_url
        async with lockgate.aio.Client(url) as client:
            assert client.url == url and client.capabilities["fencing"]
            for name in names:
                async with client.lock(name).acquire(timeout=5) as lease:
                    assert lease.is_held
                    assert await client.lock(name).try_acquire() is None

    asyncio.run(asyncio.wait_for(main(), 30))
    for name in names:
        assert live_keys(redis_cluster, name) == []


def test_without_the_flag_other_masters_redirect(redis_cluster: RedisCluster) -> None:
    # The contrast that shows `cluster=True` is what routes: a plain client talks to the seed
    # node only, which redirects every lock whose slot another master owns.
    names = names_on_every_master(redis_cluster, "plain")
    with lockgate.Client(redis_cluster.url) as client:
        for name in names[1:]:
            with pytest.raises(lockgate.ProtocolError, match="MOVED"):
                client.lock(name).try_acquire()


def test_cluster_flag_on_a_plain_url_still_validates() -> None:
    # Options are checked before anything is sent: the port below is never contacted.
    with pytest.raises(lockgate.InvalidArgumentError):
        lockgate.Client("http://127.0.0.1:1", cluster=True)
    with pytest.raises(lockgate.InvalidArgumentError):
        lockgate.aio.Client("redis://127.0.0.1:1", cluster=True, replica_acks=1)
