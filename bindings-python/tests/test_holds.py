"""A lock's shortest and longest hold from Python (min_hold / max_hold, issue 26), sync and
asyncio, against a real redis-server: the shapes and the conversion; every backend and binding
mix is the conformance scenarios min_hold_outlives_release, max_hold_ends_lease and
min_hold_unsupported."""

from __future__ import annotations

import asyncio
import time

import lockgate
import lockgate.aio
from conftest import RedisServer


def test_sync_min_hold_outlives_the_release_and_max_hold_ends_the_lease(server: RedisServer) -> None:
    with lockgate.Client(server.url) as a, lockgate.Client(server.url) as b:
        assert a.capabilities["min_hold"]
        granted = time.monotonic()
        lease = a.lock("pyhold", min_hold=0.6).acquire(timeout=1)
        assert lease.release() is True
        assert b.lock("pyhold").try_acquire() is None, "held on the server until min_hold"
        late = b.lock("pyhold").acquire(timeout=5)
        assert time.monotonic() - granted >= 0.6
        assert late.fencing_token > lease.fencing_token
        late.release()

        capped = a.lock("pymax", 0.3, renew=True, max_hold=0.5).acquire(timeout=1)
        reasons: list[lockgate.LockError] = []
        capped.on_lost(reasons.append)
        nxt = b.lock("pymax").acquire(timeout=5)
        assert not capped.is_held and isinstance(capped.lost_reason, lockgate.NotHeldError)
        assert "max_hold" in str(capped.lost_reason)
        nxt.release()


def test_asyncio_min_hold(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            lease = await a.lock("pyaiohold", min_hold=0.5).acquire(timeout=1)
            assert await lease.release() is True
            assert await b.lock("pyaiohold").try_acquire() is None
            late = await b.lock("pyaiohold").acquire(timeout=5)
            await late.release()

    asyncio.run(main())
