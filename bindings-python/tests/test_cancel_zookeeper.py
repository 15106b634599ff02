"""`lock.cancel()` returns only once the waits it ends are gone from the server (PROTOCOL.md §4,
"Nothing left behind on return"): on ZooKeeper, where a waiter is a znode, a read of the lock's
children right after `cancel()` returns finds only the holder's node, and the cancelled
`acquire` raises `LockCancelledError`."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest
from kazoo.client import KazooClient

import lockgate
from conftest import Deployment, wait_until


@pytest.fixture(scope="module")
def zk() -> Iterator[Deployment]:
    d = Deployment("zookeeper")
    try:
        yield d
    finally:
        d.close()


def test_cancel_returns_once_the_waiters_node_is_gone(zk: Deployment) -> None:
    hosts = zk.url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    kz = KazooClient(hosts=hosts)
    kz.start(timeout=15)
    path = "/lockgate/mutex/cancel-read"  # a lock name without "/" (PROTOCOL.md §9, Paths)
    try:
        with lockgate.Client(zk.url) as a, lockgate.Client(zk.url) as b:
            holder = a.lock("cancel-read").acquire(timeout=5)
            lock = b.lock("cancel-read")
            for _ in range(5):
                caught: list[BaseException] = []

                def wait() -> None:
                    try:
                        lock.acquire(timeout=30)
                    except lockgate.LockError as e:
                        caught.append(e)

                t = threading.Thread(target=wait)
                t.start()
                wait_until(lambda: len(kz.get_children(path)) == 2, what="the waiter's node")
                lock.cancel()
                # Read at once: the waiter's node is gone by the time cancel() returned.
                left = kz.get_children(path)
                t.join(5)
                assert not t.is_alive(), "the cancelled acquire kept waiting"
                assert len(left) == 1, f"cancel() returned with the waiter's node still there: {left}"
                assert len(caught) == 1 and isinstance(caught[0], lockgate.LockCancelledError), caught
            assert holder.release() is True
            # The handle works after a cancel.
            assert lock.acquire(timeout=5).release() is True
    finally:
        kz.stop()
        kz.close()


def test_a_cancelled_asyncio_acquire_raises_once_the_waiters_node_is_gone(zk: Deployment) -> None:
    """`task.cancel()` (and so `asyncio.wait_for`/`asyncio.timeout`) on a task awaiting an
    acquire: the task's CancelledError comes only once the wait's znode is deleted, as kazoo's
    and Curator's cancels delete first."""
    import asyncio

    import lockgate.aio

    hosts = zk.url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    kz = KazooClient(hosts=hosts)
    kz.start(timeout=15)
    path = "/lockgate/mutex/cancel-aio"

    async def main() -> None:
        async with lockgate.aio.Client(zk.url) as a, lockgate.aio.Client(zk.url) as b:
            holder = await a.lock("cancel-aio").acquire(timeout=5)
            lock = b.lock("cancel-aio")
            for round in range(5):
                task = asyncio.ensure_future(lock.acquire(timeout=30) if round % 2 else lock.acquire(timeout=30).__aenter__())
                while len(kz.get_children(path)) != 2:
                    await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                # Read at once: the waiter's node is gone by the time the task was cancelled.
                left = kz.get_children(path)
                assert len(left) == 1, f"the cancelled task ended with the waiter's node still there: {left}"
            # wait_for's timeout cancels the same way.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(lock.acquire(timeout=30), 0.2)
            left = kz.get_children(path)
            assert len(left) == 1, f"wait_for returned with the waiter's node still there: {left}"
            assert await holder.release() is True
            lease = await lock.acquire(timeout=5)
            assert await lease.release() is True

    try:
        asyncio.run(main())
    finally:
        kz.stop()
        kz.close()
