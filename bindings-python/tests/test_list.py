"""Listing locks from Python (issue 25): pages as dicts in both APIs, the cursor followed to the
end, the limit capped and checked, against a real redis-server. The cross-language and
per-backend cases are the conformance scenario list_locks; this checks the Python shapes."""

from __future__ import annotations

import asyncio

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer


def test_sync_list_pages_through_every_lock_once(server: RedisServer) -> None:
    with lockgate.Client(server.url, label="py-a") as a, lockgate.Client(server.url, label="py-b") as b:
        assert b.list_locks("pyls:") == {"entries": [], "cursor": None}
        with a.lock("pyls:1"), a.lock("pyls:2"), a.lock("pyls:3"), a.semaphore("pyls:s", 2), a.lock("other:1"):
            names, cursor, pages = [], None, 0
            while True:
                page = b.list_locks("pyls:", limit=2, cursor=cursor)
                assert len(page["entries"]) <= 2
                names += [e["name"] for e in page["entries"]]
                pages += 1
                cursor = page["cursor"]
                if cursor is None:
                    break
            assert sorted(names) == ["pyls:1", "pyls:2", "pyls:3", "pyls:s"] and pages >= 2
            (entry,) = [e for e in b.list_locks("pyls:s", limit=10**30)["entries"]]
            assert entry == {"name": "pyls:s", "kind": "semaphore", "holders": 1, "waiters": 0, "label": "py-a"}
        assert b.list_locks("pyls:")["entries"] == []
        for bad in ({"limit": 0}, {"limit": -1}, {"cursor": "nonsense"}):
            with pytest.raises(lockgate.InvalidArgumentError):
                b.list_locks("pyls:", **bad)
        with pytest.raises(lockgate.InvalidArgumentError):
            b.list_locks("}x")
        with pytest.raises(TypeError):
            b.list_locks(7)


def test_asyncio_list_locks(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url, label="py-aio") as c:
            async with c.lock("pyaio:1").acquire():
                page = await c.list_locks(prefix="pyaio:")
                assert page == {"entries": [{"name": "pyaio:1", "kind": "mutex", "holders": 1, "waiters": 0, "label": "py-aio"}], "cursor": None}

    asyncio.run(main())
