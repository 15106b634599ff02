"""Type-checked by `mypy --strict` in ci.sh test: the stubs describe how the API is used."""

import asyncio
from typing import Optional
import lockgate
import lockgate.aio

def sync_use(url: str) -> Optional[int]:
    with lockgate.Client(url, key_prefix="x:") as client:
        lock = client.lock("a", 5.0, renew=True, wait=3)
        with lock.acquire(timeout=5) as lease:
            lease.extend(10)
            lease.on_lost(lambda e: print(e.code))
            lease.on_at_risk(lambda: print("at risk"))
            risky: bool = lease.at_risk
            t: Optional[int] = lease.fencing_token
        maybe = lock.try_acquire()
        if maybe is not None:
            ok: bool = maybe.release()
        with lock as l2:
            print(l2.remaining)
        return t

async def async_use(url: str) -> Optional[int]:
    async with lockgate.aio.Client(url) as client:
        lock = client.lock("a")
        async with lock.acquire(timeout=5) as lease:
            reason = await lease.lost()
            if reason is not None:
                print(reason.retryable)
        lease2 = await lock.acquire()
        await lease2.extend(3)
        r: bool = await lease2.release()
        async with lock as l3:
            return l3.fencing_token

def primitives(client: lockgate.Client) -> int:
    sem: lockgate.Semaphore = client.semaphore("pool", 3, wait=5)
    n: int = sem.permits
    with sem.acquire(timeout=1) as permit:
        n += permit.fencing_token or 0
    rw = client.read_write_lock("doc", writers_first=False, reentrant=True)
    with rw.read_lock, rw.write_lock.acquire(timeout=1) as w:
        n += w.fencing_token or 0
    election = client.election("leader", 10.0, renew=True)
    with election.campaign("node-a", timeout=5) as leadership:
        info = election.observe()
        if info is not None:
            value: str = info.value
            term: int = info.term
            left: float = info.remaining
            n += term
    maybe = election.try_campaign("node-b")
    if maybe is not None:
        maybe.release()
    re = client.lock("re", reentrant=True)
    with re, re:
        pass
    return n + (leadership.fencing_token or 0)


async def async_primitives(client: lockgate.aio.Client) -> int:
    sem: lockgate.aio.Semaphore = client.semaphore("pool", 3)
    async with sem.acquire(timeout=1) as permit:
        n = (permit.fencing_token or 0) + sem.permits
    rw = client.read_write_lock("doc")
    async with rw.read_lock:
        pass
    w = await rw.write_lock.acquire()
    await w.release()
    election = client.election("leader")
    async with election.campaign("node-a") as leadership:
        info = await election.observe()
        if info is not None:
            n += info.term
    lead = await election.campaign("node-a", timeout=3)
    reason = await lead.lost()
    maybe = await election.try_campaign("x")
    return n + (leadership.fencing_token or 0) + (0 if reason is None or maybe is None else 1)


def errors(client: lockgate.Client) -> None:
    try:
        client.lock("b").acquire(timeout=1)
    except lockgate.LockTimeoutError as e:
        print(e.code, e.retryable)
    except lockgate.LockError as e:
        print(e.code)


def run() -> None:
    asyncio.run(async_use("redis://127.0.0.1"))


def deployments(url: str) -> None:
    with lockgate.Client(url, cluster=True) as seed:
        seed.lock("a").try_acquire()
    acked = lockgate.Client(url, replica_acks=1, replica_ack_timeout=0.5, response_timeout=2)
    acked.close()
    lockgate.aio.Client(url, cluster=False, replica_acks=2)


def redlock(masters: str) -> float:
    # One client family for every backend: a Redlock is a URL, its settings are keywords.
    with lockgate.Client(f"redlock://{masters}", max_lease=10, node_timeout=0.05, drift_factor=0.01) as rl:
        caps: dict[str, bool] = rl.capabilities
        lock: lockgate.Lock = rl.lock("a", 5.0, renew=True, wait=3)
        with lock.acquire(timeout=5) as lease:
            lease.extend(5)
            lease.on_lost(lambda e: print(e.code))
            left = lease.remaining
            token: Optional[int] = lease.fencing_token
        maybe = lock.try_acquire()
        if maybe is not None:
            ok: bool = maybe.release()
        with lock as held:
            print(held.is_held, held.lost_reason, token, caps["fencing"])
        return left or 0.0


async def async_redlock(masters: str) -> bool:
    async with lockgate.aio.Client(f"rediss+redlock://{masters}", retry_delay=0.1, retry_jitter=0.1) as rl:
        lock: lockgate.aio.Lock = rl.lock("a")
        async with lock.acquire(timeout=5) as lease:
            await lease.extend(3)
            reason = await lease.lost()
            if reason is not None:
                print(reason.retryable)
        again: lockgate.aio.Lease = await lock.acquire()
        maybe = await lock.try_acquire()
        async with lock as l2:
            print(l2.remaining)
        try:
            rl.semaphore("s", 2)
        except lockgate.UnsupportedError as e:
            print(e.code)
        return await again.release() and maybe is None
