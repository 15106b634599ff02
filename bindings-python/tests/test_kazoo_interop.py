"""lockgate and kazoo (PyPI) on one real ZooKeeper server from the project's launcher: what
interoperates with kazoo's own recipes, and what does not (bindings-python/README.md, "Coming
from kazoo", says the same).

lockgate's ZooKeeper primitives use Apache Curator's layout (a mutex's contenders are
`_c_<uuid>-lock-<sequence>` children of the lock's path). kazoo's `Lock` names its nodes
`<uuid>__lock__<sequence>` and, by default, counts only nodes named that way as contenders;
since kazoo 2.7.1 `extra_lock_patterns` adds other names (kazoo's way to share a lock with
Curator), and with `("-lock-",)` it queues behind lockgate's nodes by sequence number. lockgate,
like Curator, does not read kazoo's names: the two do not exclude each other, so a path must
not be shared between them (these tests pin down exactly what happens).
"""

from __future__ import annotations

from typing import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

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
    return kz.get_children(p) if kz.exists(p) else []


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


def test_lockgate_does_not_wait_for_a_kazoo_holder(lg: lockgate.Client, kz: KazooClient) -> None:
    """The other direction does not hold: lockgate sorts children as Curator does (by what follows
    `lock-`), so a kazoo node (`<uuid>__lock__<seq>`, no `lock-`) sorts after every lockgate node
    and never blocks it. A kazoo holder and a lockgate holder at once: NOT interoperable."""
    p = path("reverse")
    klock = kz.Lock(p, "kazoo", extra_lock_patterns=CURATOR_PATTERN)
    assert klock.acquire(timeout=5)
    try:
        lease = lg.lock(p).try_acquire()
        assert lease is not None, "lockgate now waits for kazoo's nodes: update the README's kazoo section"
        assert len(children(kz, p)) == 2  # both hold: the kazoo node and lockgate's
        lease.release()
    finally:
        klock.release()
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
