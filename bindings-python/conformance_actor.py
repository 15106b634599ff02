"""The Python conformance actor: one JSON operation per line on stdin, performed through
lockgate's public Python API only, one JSON result per line on stdout.

The protocol is described in conformance/README.md. Run from the repository root, after
`bindings-python/ci.sh build`: python3 bindings-python/conformance_actor.py
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, Optional

import lockgate


def err(e: lockgate.LockError) -> dict[str, Any]:
    return {"ok": False, "error": e.code, "retryable": e.retryable}


NOT_HELD = {"ok": False, "error": "NOT_HELD", "retryable": False}


def secs(op: dict[str, Any], key: str) -> Optional[float]:
    """A millisecond field as seconds, untouched otherwise (the library rejects bad values)."""
    v = op.get(key)
    return None if v is None else v / 1000.0


def lock_of(client: lockgate.Client, op: dict[str, Any]) -> lockgate.Lock:
    return client.lock(
        op.get("lock", ""),
        secs(op, "lease_ms"),
        renew=op.get("renew"),
        entry_ttl=secs(op, "entry_ttl_ms"),
    )


class Actor:
    def __init__(self) -> None:
        self.client: Optional[lockgate.Client] = None
        self.leases: dict[str, lockgate.Lease] = {}

    def handle(self, op: dict[str, Any]) -> dict[str, Any]:
        name = op.get("lock", "")
        kind = op.get("op", "")
        try:
            if kind == "connect":
                client = lockgate.Client(op.get("url", ""), key_prefix=op.get("prefix"))
                if self.client is not None:
                    self.client.close()
                self.client = client
                return {"ok": True}
            assert self.client is not None, "the orchestrator connects first"
            if kind == "lock":
                lock_of(self.client, op)
                return {"ok": True}
            if kind in ("acquire", "try_acquire"):
                lock = lock_of(self.client, op)
                if kind == "acquire":
                    lease: Optional[lockgate.Lease] = lock.acquire(timeout=secs(op, "timeout_ms") or 0.0)
                else:
                    lease = lock.try_acquire()
                if lease is None:
                    return {"ok": True, "acquired": False}
                self.leases[name] = lease
                return {"ok": True, "acquired": True, "token": str(lease.fencing_token)}
            if kind == "release":
                held = self.leases.pop(name, None)
                return NOT_HELD if held is None else {"ok": True, "was_held": held.release()}
            if kind == "extend":
                held = self.leases.get(name)
                if held is None:
                    return NOT_HELD
                held.extend(secs(op, "ms") or 0.0)
                return {"ok": True}
            if kind == "is_held":
                held = self.leases.get(name)
                return {"ok": True, "held": held is not None and held.is_held}
            if kind == "wait_lost":
                held = self.leases.get(name)
                if held is None:
                    return NOT_HELD
                lost = threading.Event()
                reasons: list[lockgate.LockError] = []
                held.on_lost(lambda reason: (reasons.append(reason), lost.set()))
                if lost.wait(secs(op, "timeout_ms") or 5.0):
                    return {"ok": True, "lost": True, "error": reasons[0].code}
                return {"ok": True, "lost": False}
            if kind == "hammer":
                lock = lock_of(self.client, op)
                hold = secs(op, "hold_ms") or 0.002
                records = []
                for _ in range(int(op.get("times", 1))):
                    with lock.acquire(timeout=30) as lease:
                        enter = time.time_ns()
                        time.sleep(hold)
                        leave = time.time_ns()
                    records.append([str(lease.fencing_token), str(enter), str(leave)])
                return {"ok": True, "records": records}
            return {"ok": False, "error": "UNSUPPORTED_OP", "detail": kind}
        except lockgate.LockError as e:
            return err(e)

    def close(self) -> None:
        for lease in self.leases.values():
            try:
                lease.release()
            except lockgate.LockError:
                pass
        if self.client is not None:
            self.client.close()


def main() -> None:
    actor = Actor()
    for line in sys.stdin:
        try:
            op = json.loads(line)
        except ValueError as e:
            op = {"op": "invalid", "detail": str(e)}
        if op.get("op") == "exit":
            break
        reply = actor.handle(op)
        reply["id"] = op.get("id")
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    actor.close()


if __name__ == "__main__":
    main()
