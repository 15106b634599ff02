"""Inspecting a lock from Python (issue 25): the snapshot as a dict in both APIs, is_locked(),
by name and through handles, against a real redis-server. The cross-language and per-backend
cases are the conformance scenarios inspect_*; this checks the Python shapes."""

from __future__ import annotations

import asyncio

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer


def test_sync_inspect_shows_holder_waiter_and_own_holds(server: RedisServer) -> None:
    with lockgate.Client(server.url, label="py-a") as a, lockgate.Client(server.url, label="py-b") as b:
        assert b.inspect("orders") == {"kind": "mutex", "locked": False, "holders": [], "waiters": [], "permits": None, "remaining_ms": None}
        lock = a.lock("orders", reentrant=True)
        assert not lock.is_locked()
        with lock as lease, lock:
            s = b.inspect("orders")
            (h,) = s["holders"]
            assert (h["label"], h["fencing_token"], h["mode"], h["holds"]) == ("py-a", lease.fencing_token, "exclusive", None)
            assert 0 < h["remaining_ms"] <= 30_000 and h["held_for_ms"] >= 0
            assert lock.inspect()["holders"][0]["holds"] == 2
            assert b.lock("orders").is_locked()
        assert not b.lock("orders").is_locked()
        with pytest.raises(lockgate.InvalidArgumentError):
            b.inspect("orders", kind="table")
        with pytest.raises(lockgate.InvalidArgumentError):
            b.inspect("")


def test_asyncio_inspect_of_a_semaphore_and_an_election(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url, label="py-aio") as c:
            sem = c.semaphore("pool", 2)
            async with sem.acquire():
                s = await sem.inspect()
                assert (s["kind"], s["permits"], [h["mode"] for h in s["holders"]]) == ("semaphore", 2, ["shared"])
                assert await sem.is_locked()
            e = c.election("svc")
            async with e.campaign("10.0.0.1:80"):
                s = await e.inspect()
                # Redis keeps a candidate's label beside its value (PROTOCOL.md §7).
                assert (s["holders"][0]["value"], s["holders"][0]["label"]) == ("10.0.0.1:80", "py-aio")
                assert (await c.inspect("svc", "election"))["locked"]

    asyncio.run(asyncio.wait_for(main(), 60))
