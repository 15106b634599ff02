"""Leases at risk on ZooKeeper (one server behind the launcher's proxy): a holder that cannot
reach its server is told once per spell (``on_at_risk``) and sees ``lease.at_risk`` while it
lasts; reconnecting within the session makes it safe again with the same lease. Both APIs."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Iterator

import pytest

import lockgate
import lockgate.aio
from conftest import Deployment, wait_until

# A confirmation counts for half the session (6 s), renewals go every 2 s, and the 0.8 s
# response timeout notices a silent connection: a 2 s freeze is well within the lease.
OPTIONS = {"session_timeout": 12, "response_timeout": 0.8}
FREEZE = 2.0


@pytest.fixture(scope="module")
def zk() -> Iterator[Deployment]:
    d = Deployment("zookeeper", "--proxied")
    try:
        yield d
    finally:
        d.close()


def test_a_holder_is_told_at_risk_and_keeps_its_lease_by_reconnecting(zk: Deployment) -> None:
    with lockgate.Client(zk.url, **OPTIONS) as client:
        lease = client.lock("py-at-risk").acquire(timeout=5)
        assert not lease.at_risk
        spells: list[float] = []
        lost: list[lockgate.LockError] = []
        lease.on_at_risk(lambda: spells.append(time.monotonic()))
        lease.on_lost(lost.append)

        # Replies held back: the client leaves the connection (at risk) and reconnects.
        zk.command("deafen")
        wait_until(lambda: spells, 5, "the at-risk callback")
        wait_until(lambda: not lease.at_risk, 5, "safe again after reconnecting")
        zk.command("restore")
        assert len(spells) == 1, spells

        # The server freezes: at risk while it lasts (still held); a callback registered
        # meanwhile is called at once.
        zk.command("pause 0")
        paused = time.monotonic()
        late = threading.Event()
        try:
            wait_until(lambda: lease.at_risk, FREEZE - 0.2, "at risk while the server is frozen")
            assert lease.is_held
            lease.on_at_risk(late.set)
            assert late.wait(1), "a callback registered while at risk runs at once"
        finally:
            time.sleep(max(0.0, FREEZE - (time.monotonic() - paused)))
            zk.command("resume 0")
        wait_until(lambda: len(spells) == 2, 2, "one call for the second spell")
        wait_until(lambda: not lease.at_risk, 5, "safe again after the server resumed")
        assert lease.is_held and lease.lost_reason is None and not lost
        assert lease.release() is True
        assert len(spells) == 2, "no spell after the release"


def test_asyncio_leases_are_told_on_the_loop(zk: Deployment) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(zk.url, **OPTIONS) as client:
            lease = await client.lock("py-at-risk-aio").acquire(timeout=5)
            told = asyncio.Event()
            loop_thread: list[threading.Thread] = []

            def on_risk() -> None:
                loop_thread.append(threading.current_thread())
                told.set()

            lease.on_at_risk(on_risk)
            zk.command("pause 0")
            paused = time.monotonic()
            try:
                await asyncio.wait_for(told.wait(), FREEZE - 0.2)
                assert lease.at_risk and lease.is_held
            finally:
                await asyncio.sleep(max(0.0, FREEZE - (time.monotonic() - paused)))
                zk.command("resume 0")
            assert loop_thread == [threading.current_thread()], "called on the event loop's thread"
            deadline = time.monotonic() + 5
            while lease.at_risk:
                assert time.monotonic() < deadline, "safe again after the server resumed"
                await asyncio.sleep(0.01)
            assert lease.is_held
            assert await lease.release() is True

    asyncio.run(main())


def test_on_at_risk_needs_a_callable(zk: Deployment) -> None:
    with lockgate.Client(zk.url) as client:
        with client.lock("py-at-risk-bad").acquire(timeout=5) as lease:
            with pytest.raises(TypeError, match="on_at_risk needs a callable"):
                lease.on_at_risk(42)  # type: ignore[arg-type]
