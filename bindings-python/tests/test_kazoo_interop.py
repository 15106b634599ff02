"""lockgate and kazoo (PyPI) on one real ZooKeeper server from the project's launcher: what
interoperates with kazoo's own recipes, and what does not (bindings-python/README.md, "Coming
from kazoo", says the same).

lockgate's ZooKeeper primitives use Apache Curator's layout (a mutex's contenders are
`_c_<uuid>-lock-<sequence>` children of the lock's path). kazoo's `Lock` names its nodes
`<uuid>__lock__<sequence>` and, by default, counts only nodes named that way as contenders;
since kazoo 2.7.1 `extra_lock_patterns` adds other names (kazoo's way to share a lock with
Curator), and with `("-lock-",)` it queues behind lockgate's nodes by sequence number.
lockgate orders every child whose name ends in a sequence number by that number, kazoo's
included, so it always waits for kazoo's holders. Mutex interoperability with kazoo therefore
needs `extra_lock_patterns=("-lock-",)` on kazoo's side; without it kazoo ignores lockgate.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout, NoNodeError

import lockgate
from conftest import Deployment, wait_until

CURATOR_PATTERN = ("-lock-",)


@pytest.fixture(scope="module")
def zk() -> Iterator[Deployment]:
    d = Deployment("zookeeper")
    try:
        yield d
    finally:
        d.close()


def hosts(zk: Deployment) -> str:
    return zk.url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]


@pytest.fixture
def kz(zk: Deployment) -> Iterator[KazooClient]:
    c = KazooClient(hosts=hosts(zk))
    c.start(timeout=15)
    try:
        yield c
    finally:
        c.stop()
        c.close()


@pytest.fixture
def lg(zk: Deployment) -> Iterator[lockgate.Client]:
    with lockgate.Client(zk.url) as c:
        yield c


_seq = iter(range(1, 1_000_000))


def path(what: str) -> str:
    return f"/lockgate-kazoo/{what}-{next(_seq)}"


def children(kz: KazooClient, p: str) -> list[str]:
    # Not exists() then get_children(): the lock's directory may go in between (an emptied
    # lock directory is removed), which is "no nodes" too.
    try:
        return kz.get_children(p)
    except NoNodeError:
        return []


class Waiter:
    """A blocking acquire on its own thread; `done` is set once it returns (or fails)."""

    def __init__(self, acquire: Callable[[], Any], grants: list[str], label: str) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

        def run() -> None:
            try:
                self.result = acquire()
                grants.append(label)
            except BaseException as e:  # re-raised by wait()
                self.error = e
            finally:
                self.done.set()

        threading.Thread(target=run, daemon=True).start()

    def wait(self, timeout: float = 10.0) -> Any:
        assert self.done.wait(timeout), "the waiter was not served"
        if self.error is not None:
            raise self.error
        return self.result


def test_kazoo_lock_with_curator_pattern_waits_for_a_lockgate_holder(lg: lockgate.Client, kz: KazooClient) -> None:
    p = path("mutex")
    lease = lg.lock(p).acquire(timeout=5)
    klock = kz.Lock(p, "kazoo", extra_lock_patterns=CURATOR_PATTERN)
    with pytest.raises(LockTimeout):
        klock.acquire(timeout=0.3)
    assert len(children(kz, p)) == 1  # kazoo withdrew its node
    lease.release()
    assert klock.acquire(timeout=5)
    klock.release()
    wait_until(lambda: children(kz, p) == [], what="no nodes left")


@pytest.mark.parametrize("patterns", [CURATOR_PATTERN, ()], ids=["kazoo-with-pattern", "kazoo-default"])
def test_lockgate_waits_for_a_kazoo_holder(lg: lockgate.Client, kz: KazooClient, patterns: tuple[str, ...]) -> None:
    """lockgate orders every child ending in a sequence number by it, kazoo's included: it waits
    for a kazoo holder whatever kazoo's own settings."""
    p = path("reverse")
    klock = kz.Lock(p, "kazoo", extra_lock_patterns=patterns)
    assert klock.acquire(timeout=5)
    lock = lg.lock(p)
    with pytest.raises(lockgate.LockTimeoutError):
        lock.acquire(timeout=0.3)
    assert lock.try_acquire() is None
    assert len(children(kz, p)) == 1  # lockgate withdrew its nodes
    waiter = Waiter(lambda: lock.acquire(timeout=10), [], "L")
    wait_until(lambda: len(children(kz, p)) == 2, what="lockgate queued")
    assert not waiter.done.wait(0.2), "lockgate was granted beside kazoo's holder"
    klock.release()
    waiter.wait().release()
    wait_until(lambda: children(kz, p) == [], what="no nodes left")


def test_mixed_queue_is_served_in_arrival_order(lg: lockgate.Client, kz: KazooClient, zk: Deployment) -> None:
    """With `extra_lock_patterns=("-lock-",)` on kazoo's side, a queue mixing both is one FIFO."""
    p = path("queue")
    grants: list[str] = []
    first = lg.lock(p).acquire(timeout=5)
    grants.append("L0")
    k1 = kz.Lock(p, "K1", extra_lock_patterns=CURATOR_PATTERN)
    w1 = Waiter(lambda: k1.acquire(timeout=10), grants, "K1")
    wait_until(lambda: len(children(kz, p)) == 2, what="K1 queued")
    with lockgate.Client(zk.url) as lg2:
        l2 = lg2.lock(p)
        w2 = Waiter(lambda: l2.acquire(timeout=10), grants, "L2")
        wait_until(lambda: len(children(kz, p)) == 3, what="L2 queued")
        k3 = kz.Lock(p, "K3", extra_lock_patterns=CURATOR_PATTERN)
        w3 = Waiter(lambda: k3.acquire(timeout=10), grants, "K3")
        wait_until(lambda: len(children(kz, p)) == 4, what="K3 queued")
        assert not w1.done.wait(0.2)
        assert grants == ["L0"]

        first.release()
        assert w1.wait() is True
        assert grants == ["L0", "K1"]
        assert not w2.done.wait(0.2), "lockgate was granted beside kazoo's holder"
        k1.release()
        lease2 = w2.wait()
        assert grants == ["L0", "K1", "L2"]
        assert not w3.done.wait(0.2), "kazoo was granted beside lockgate's holder"
        lease2.release()
        assert w3.wait() is True
        k3.release()
    assert grants == ["L0", "K1", "L2", "K3"]
    wait_until(lambda: children(kz, p) == [], what="no nodes left")


def test_kazoo_lock_by_default_does_not_see_lockgate(lg: lockgate.Client, kz: KazooClient) -> None:
    """kazoo's default Lock counts only `__lock__` nodes: it does NOT exclude a lockgate holder."""
    p = path("default")
    lease = lg.lock(p).acquire(timeout=5)
    klock = kz.Lock(p, "kazoo")
    try:
        assert klock.acquire(timeout=2), "kazoo's default Lock now sees lockgate's nodes: update the README"
        klock.release()
    finally:
        lease.release()


def test_kazoo_write_lock_does_not_exclude_lockgate_readers(lg: lockgate.Client, kz: KazooClient) -> None:
    """Read-write locks do not interoperate: lockgate's readers wait only for Curator-named writer
    nodes, and kazoo's writer is `<uuid>__lock__<seq>`."""
    p = path("rw")
    writer = kz.WriteLock(p, "kazoo")
    assert writer.acquire(timeout=5)
    try:
        lease = lg.read_write_lock(p).read_lock.try_acquire()
        assert lease is not None, "lockgate's readers now wait for kazoo's writers: update the README"
        lease.release()
    finally:
        writer.release()
