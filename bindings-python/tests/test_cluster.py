"""`cluster=True` (or a `redis+cluster://` URL) against a real three-master Redis Cluster the tests start (loopback ports,
temp dirs, stopped by pid): each lock's commands reach the master that owns its slot, grants
are handed off across nodes, and shared primitives work unchanged."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import lockgate
import lockgate.aio
from conftest import RedisCluster, wait_until


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
        locks = [client.lock(n, timeout=5) for n in names]
        leases = [lock.acquire() for lock in locks]  # all held at once, on three masters
        for name, owner, lease in zip(names, owners, leases):
            assert lease.is_held and lease.fencing_token >= 1
            # The lock key lives on the master that owns its slot, and nowhere else.
            assert live_keys(redis_cluster, name) == [(owner, f"lockgate:{{{name}}}")]
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


def test_contended_handoff_across_nodes(redis_cluster: RedisCluster) -> None:
    # A lock owned by a master other than the seed node: the grant is published there and
    # must reach the waiter's subscription through the cluster bus.
    name = next(n for n in names_on_every_master(redis_cluster, "handoff")
                if redis_cluster.owner(f"lockgate:{{{n}}}").port != redis_cluster.nodes[0].port)
    owner = redis_cluster.owner(f"lockgate:{{{name}}}").raw()
    holder_client = lockgate.Client(redis_cluster.url, cluster=True)
    waiter_client = lockgate.Client(redis_cluster.nodes[2].url, cluster=True)  # another seed
    try:
        holder = holder_client.lock(name).acquire(timeout=5)
        got: list[lockgate.Lease] = []
        errors: list[BaseException] = []

        def wait() -> None:
            try:
                got.append(waiter_client.lock(name).acquire(timeout=15))
            except BaseException as e:  # surfaced by the assertions below
                errors.append(e)

        t = threading.Thread(target=wait)
        t.start()
        wait_until(lambda: owner.zcard(f"lockgate:{{{name}}}:queue") == 1, what="the waiter to queue")
        time.sleep(0.1)
        assert not got and not errors, "the waiter must not get the lock while it is held"
        released_at = time.monotonic()
        assert holder.release() is True
        t.join(15)
        assert not errors, errors
        assert len(got) == 1
        handoff = time.monotonic() - released_at
        # A notification, not a heartbeat re-run (those come every few seconds).
        assert handoff < 1.0, f"handoff took {handoff:.3f} s"
        lease = got[0]
        assert lease.is_held and lease.fencing_token > holder.fencing_token
        assert owner.zcard(f"lockgate:{{{name}}}:queue") == 0
        assert lease.release() is True
        assert live_keys(redis_cluster, name) == []
    finally:
        holder_client.close()
        waiter_client.close()


def test_semaphore_on_a_cluster(redis_cluster: RedisCluster) -> None:
    names = names_on_every_master(redis_cluster, "pool")
    clients = [lockgate.Client(redis_cluster.url, cluster=True) for _ in range(3)]
    try:
        for name in names[1:]:  # masters other than the seed node
            sems = [c.semaphore(name, 2, timeout=10) for c in clients]
            a = sems[0].acquire()
            b = sems[1].acquire()
            assert a.fencing_token != b.fencing_token
            assert sems[2].try_acquire() is None, "both permits are taken"
            holders_key = f"lockgate:{{{name}}}:sem:holders"
            assert redis_cluster.owner(holders_key).raw().zcard(holders_key) == 2
            got: list[lockgate.Lease] = []
            t = threading.Thread(target=lambda: got.append(sems[2].acquire()))
            t.start()
            time.sleep(0.2)
            assert not got
            assert a.release() is True
            t.join(10)
            assert len(got) == 1 and got[0].is_held
            assert got[0].fencing_token > b.fencing_token
            assert b.release() is True and got[0].release() is True
            assert live_keys(redis_cluster, name) == []
    finally:
        for c in clients:
            c.close()


def test_read_write_lock_on_a_cluster(redis_cluster: RedisCluster) -> None:
    name = names_on_every_master(redis_cluster, "catalog")[2]
    with lockgate.Client(redis_cluster.url, cluster=True) as c1, \
            lockgate.Client(redis_cluster.url, cluster=True) as c2:
        rw1, rw2 = c1.read_write_lock(name), c2.read_write_lock(name)
        with rw1.read_lock.acquire(timeout=5), rw2.read_lock.acquire(timeout=5):
            assert rw2.write_lock.try_acquire() is None, "readers exclude a writer"
        with rw2.write_lock.acquire(timeout=5):
            assert rw1.read_lock.try_acquire() is None, "a writer excludes readers"
    assert live_keys(redis_cluster, name) == []


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
