"""The Python conformance actor: one JSON operation per line on stdin, performed through
lockgate's public Python API only, one JSON result per line on stdout.

The protocol is described in conformance/README.md: one `connect` for every backend (protocol 2:
`url` and `options`; the reply lists the client's capabilities), then mutexes, semaphores,
read-write lock halves and elections (field `kind`), one library handle per `handle` with a stack
of held leases; every error reply (ALREADY_HELD included: `e.code` is the core's code) leaves that
stack unchanged. Protocol 1's `connect_redlock` and `kind: redlock` still work: a second client
over a `redlock://` URL. Run from the repository root, after
`bindings-python/ci.sh build`: python3 bindings-python/conformance_actor.py
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, Optional, Union

import lockgate


def err(e: lockgate.LockError) -> dict[str, Any]:
    return {"ok": False, "error": e.code, "retryable": e.retryable}


NOT_HELD = {"ok": False, "error": "NOT_HELD", "retryable": False}


def secs(op: dict[str, Any], key: str) -> Optional[float]:
    """A millisecond field as seconds, untouched otherwise (the library rejects bad values)."""
    v = op.get(key)
    return None if v is None else v / 1000.0


Handle = Union[lockgate.Lock, lockgate.Election]
AnyLease = lockgate.Lease

# The actor protocol's connect options → the library's keyword arguments.
OPTIONS = {
    "prefix": "key_prefix",
    "replica_acks": "replica_acks",
    "max_lease_ms": "max_lease",
    "session_timeout_ms": "session_timeout",
    "label": "label",
}


def client_options(fields: dict[str, Any]) -> dict[str, Any]:
    """The library's keyword arguments for a step's options: untouched (the library rejects bad
    values) but for milliseconds, which become seconds."""
    return {
        OPTIONS[k]: v / 1000 if k.endswith("_ms") else v for k, v in fields.items() if k in OPTIONS and v is not None
    }


def granted(lease: AnyLease) -> dict[str, Any]:
    """A grant's reply; a Redlock grant has no fencing token (PROTOCOL.md §8)."""
    if lease.fencing_token is None:
        return {"ok": True, "acquired": True}
    return {"ok": True, "acquired": True, "token": str(lease.fencing_token)}


def handle_of(client: lockgate.Client, redlock: Optional[lockgate.Client], op: dict[str, Any]) -> Handle:
    """A new library handle for the step's lock name, primitive and options (conformance/README.md,
    "Primitive options"); the library validates them all."""
    name = op.get("lock", "")
    lease = secs(op, "lease_ms")
    renew = op.get("renew")
    entry_ttl = secs(op, "entry_ttl_ms")
    holds = {"min_hold": secs(op, "min_hold_ms"), "max_hold": secs(op, "max_hold_ms")}
    kind = op.get("kind", "mutex")
    reentrant = bool(op.get("reentrant", False))
    if kind == "redlock":
        assert redlock is not None, "the orchestrator sends connect_redlock first"
        return redlock.lock(name, lease, renew=renew)  # protocol 1
    if kind == "mutex":
        return client.lock(name, lease, renew=renew, entry_ttl=entry_ttl, reentrant=reentrant, **holds)
    if kind == "semaphore":
        permits: Any = op.get("permits")  # untouched: the library rejects 0
        return client.semaphore(name, permits, lease, renew=renew, entry_ttl=entry_ttl, **holds)
    if kind in ("read", "write"):
        rw = client.read_write_lock(
            name,
            lease,
            renew=renew,
            entry_ttl=entry_ttl,
            writers_first=bool(op.get("writers_first", True)),
            reentrant=reentrant,
            **holds,
        )
        return rw.read_lock if kind == "read" else rw.write_lock
    if kind == "leader":
        return client.election(name, lease, renew=renew, entry_ttl=entry_ttl, **holds)
    raise UnknownKind(f"kind {kind!r}")


def listed(client, prefix, limit):
    """Pages through every lock under ``prefix``; each as "<name after the prefix> <kind> <holders>
    <waiters>", sorted, with the labels and the number of pages read."""
    entries, labels, pages, cursor = [], [], 0, None
    while True:
        page = client.list_locks(prefix, limit, cursor)
        pages += 1
        for e in page["entries"]:
            rest = e["name"][len(prefix):] if e["name"].startswith(prefix) else e["name"]
            entries.append(f'{rest} {e["kind"]} {e["holders"]} {e["waiters"]}')
            labels.append(e["label"])
        cursor = page["cursor"]
        if cursor is None or pages >= 10_000:
            break
    return {"ok": True, "entries": sorted(entries), "labels": sorted(labels, key=lambda l: (l is not None, l or "")), "pages": pages}


def inspected(s: dict) -> dict:
    """An ``inspect`` reply (conformance/README.md), from ``inspect()``'s dict."""
    first = s["holders"][0] if s["holders"] else None
    token = first["fencing_token"] if first else None
    writer = next((h for h in s["holders"] if h["mode"] == "exclusive"), None)
    return {
        "ok": True,
        "locked": s["locked"],
        "holders": [h["label"] for h in s["holders"]],
        "waiters": [w["label"] for w in s["waiters"]],
        "readers": sum(1 for h in s["holders"] if h["mode"] == "shared"),
        "writer": writer is not None,
        "token": None if token is None else str(token),
        "holds": [h["holds"] for h in s["holders"]],
        "permits": s["permits"],
        "leader": writer["value"] if writer else None,
    }


class UnknownKind(ValueError):
    """A scenario named a primitive kind the actor protocol does not define."""


class Actor:
    def __init__(self) -> None:
        self.client: Optional[lockgate.Client] = None
        self.redlock: Optional[lockgate.Client] = None  # protocol 1's second client
        # One library handle per `handle` (default: the lock name), made on its first use, and
        # the stack of leases it holds (most recent last).
        self.handles: dict[str, Handle] = {}
        self.leases: dict[str, list[AnyLease]] = {}

    def handle_for(self, op: dict[str, Any]) -> Handle:
        """The step's handle: the one made on its first use. The step's own options are always
        passed to the library first, so bad ones are rejected even for a known handle."""
        assert self.client is not None, "the orchestrator connects first"
        fresh = handle_of(self.client, self.redlock, op)
        return self.handles.setdefault(op.get("handle", op.get("lock", "")), fresh)

    def top(self, op: dict[str, Any]) -> Optional[AnyLease]:
        stack = self.leases.get(op.get("handle", op.get("lock", "")))
        return stack[-1] if stack else None

    def acquire(self, op: dict[str, Any], wait: bool) -> Optional[AnyLease]:
        handle = self.handle_for(op)
        timeout = secs(op, "timeout_ms") or 0.0
        if isinstance(handle, lockgate.Election):
            value = op.get("value", "")
            return handle.campaign(value, timeout=timeout) if wait else handle.try_campaign(value)
        return handle.acquire(timeout=timeout) if wait else handle.try_acquire()

    def handle(self, op: dict[str, Any]) -> dict[str, Any]:
        kind = op.get("op", "")
        key = op.get("handle", op.get("lock", ""))
        try:
            if kind == "connect":
                # Protocol 2 sends `options`; protocol 1 a top-level `prefix`.
                options = client_options(op.get("options") or {"prefix": op.get("prefix")})
                client = lockgate.Client(op.get("url", ""), **options)
                if self.client is not None:
                    self.client.close()
                self.client = client
                return {"ok": True, "capabilities": [n for n, on in client.capabilities.items() if on]}
            if kind == "connect_redlock":  # protocol 1: a Redlock is a redlock:// URL now
                hosts = ",".join(u.split("://", 1)[-1] for u in op.get("urls", []))
                options = client_options({"prefix": op.get("prefix"), "max_lease_ms": op.get("max_lease_ms")})
                redlock = lockgate.Client(f"redlock://{hosts}", **options)
                if self.redlock is not None:
                    self.redlock.close()
                self.redlock = redlock
                return {"ok": True}
            assert self.client is not None, "the orchestrator connects first"
            if kind == "lock":
                self.handle_for(op)
                return {"ok": True}
            if kind in ("acquire", "try_acquire"):
                lease = self.acquire(op, wait=kind == "acquire")
                if lease is None:
                    return {"ok": True, "acquired": False}
                self.leases.setdefault(key, []).append(lease)
                return granted(lease)
            if kind == "release":
                stack = self.leases.get(key)
                if not stack:
                    return NOT_HELD
                # Popped only once released: an error reply leaves the stack unchanged.
                was_held = stack[-1].release()
                stack.pop()
                return {"ok": True, "was_held": was_held}
            if kind == "extend":
                held = self.top(op)
                if held is None:
                    return NOT_HELD
                held.extend(secs(op, "ms") or 0.0)
                return {"ok": True}
            if kind == "is_held":
                held = self.top(op)
                return {"ok": True, "held": held is not None and held.is_held}
            if kind == "wait_lost":
                held = self.top(op)
                if held is None:
                    return NOT_HELD
                lost = threading.Event()
                reasons: list[lockgate.LockError] = []

                def on_lost(reason: lockgate.LockError) -> None:
                    reasons.append(reason)
                    lost.set()

                held.on_lost(on_lost)
                if lost.wait(secs(op, "timeout_ms") or 5.0):
                    return {"ok": True, "lost": True, "error": reasons[0].code}
                return {"ok": True, "lost": False}
            if kind == "export":
                held = self.top(op)
                if held is None:
                    return NOT_HELD
                return {"ok": True, "identity": held.identity()}
            if kind == "adopt":
                # The adopted lease joins the stack of the step's handle, as an acquire's would.
                adopted = self.client.adopt(op.get("identity", ""), secs(op, "lease_ms"), renew=op.get("renew"))
                self.leases.setdefault(key, []).append(adopted)
                return granted(adopted)
            if kind == "hammer":
                handle = self.handle_for(op)
                hold = secs(op, "hold_ms") or 0.002
                records: list[list[Optional[str]]] = []
                for _ in range(int(op.get("times", 1))):
                    holding: AnyLease
                    if isinstance(handle, lockgate.Election):
                        holding = handle.campaign(op.get("value", ""), timeout=30)
                    else:
                        holding = handle.acquire(timeout=30)
                    with holding:
                        enter = time.time_ns()
                        time.sleep(hold)
                        leave = time.time_ns()
                    token = granted(holding).get("token")
                    records.append([token, str(enter), str(leave)])
                return {"ok": True, "records": records}
            if kind == "observe":
                leader = self.client.election(op.get("lock", "")).observe()
                if leader is None:
                    return {"ok": True, "leader": False}
                return {"ok": True, "leader": True, "value": leader.value, "token": str(leader.term)}
            if kind == "inspect":
                # With ``permits``, through a semaphore handle (which knows its count); else by name.
                if "permits" in op:
                    s = self.client.semaphore(op.get("lock", ""), op["permits"]).inspect()
                else:
                    s = self.client.inspect(op.get("lock", ""), op.get("kind", "mutex"))
                return inspected(s)
            if kind == "break":
                token = int(op["token"]) if "token" in op else None
                b = self.client.break_lock(op.get("lock", ""), token, kind=op.get("kind", "mutex"))
                if b is None:
                    return {"ok": True, "broken": False}
                t = b["fencing_token"]
                return {"ok": True, "broken": True, "label": b["label"], "token": None if t is None else str(t)}
            if kind == "list":
                return listed(self.client, op.get("lock", ""), op.get("limit"))
            return {"ok": False, "error": "UNSUPPORTED_OP", "detail": kind}
        except lockgate.LockError as e:
            return err(e)
        except UnknownKind as e:
            return {"ok": False, "error": "UNSUPPORTED_OP", "detail": str(e)}
        except (TypeError, OverflowError) as e:
            # A field of the wrong JSON type (the library takes Python's own types).
            return {"ok": False, "error": "TYPE_ERROR", "retryable": False, "detail": str(e)}

    def close(self) -> None:
        for stack in self.leases.values():
            while stack:
                try:
                    stack.pop().release()
                except lockgate.LockError:
                    pass
        if self.client is not None:
            self.client.close()
        if self.redlock is not None:
            self.redlock.close()


def main() -> None:
    actor = Actor()
    for line in sys.stdin:
        try:
            op = json.loads(line)
        except ValueError as e:
            op = {"op": "invalid", "detail": str(e)}
        if op.get("op") == "exit":
            break
        if op.get("op") == "reset":
            # The orchestrator reuses this process for its next run: as a fresh actor.
            actor.close()
            actor = Actor()
            reply = {"ok": True}
        else:
            reply = actor.handle(op)
        reply["id"] = op.get("id")
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    actor.close()


if __name__ == "__main__":
    main()
