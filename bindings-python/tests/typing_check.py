"""Type-checked by `mypy --strict` in ci.sh test: the stubs describe how the API is used."""

import asyncio
import lockgate
import lockgate.aio

def sync_use(url: str) -> int:
    with lockgate.Client(url, key_prefix="x:") as client:
        lock = client.lock("a", 5.0, renew=True, timeout=3)
        with lock.acquire(timeout=5) as lease:
            lease.extend(10)
            lease.on_lost(lambda e: print(e.code))
            t: int = lease.fencing_token
        maybe = lock.try_acquire()
        if maybe is not None:
            ok: bool = maybe.release()
        with lock as l2:
            print(l2.remaining)
        return t

async def async_use(url: str) -> int:
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

def errors(client: lockgate.Client) -> None:
    try:
        client.lock("b").acquire(timeout=1)
    except lockgate.LockTimeoutError as e:
        print(e.code, e.retryable)
    except lockgate.LockError as e:
        print(e.code)


def run() -> None:
    asyncio.run(async_use("redis://127.0.0.1"))
