"""Type stubs of the compiled module (checked by ``python -m mypy.stubtest lockgate``)."""

import os
from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import TracebackType
from typing import Any, Dict, List, Optional, Tuple, Union

from typing_extensions import Self, disjoint_base, final

__all__ = [
    "__version__", "_close_all", "_flush_telemetry", "_set_telemetry_sink", "_metric_instruments", "_metric_totals", "LockError", "InvalidArgumentError", "LockTimeoutError", "NotHeldError",
    "LockConnectionError", "AuthenticationError", "ProtocolError", "LockCancelledError", "ClientClosedError",
    "AlreadyHeldError", "UnsupportedError", "Client", "Lock", "Semaphore", "ReadWriteLock", "Election", "LeaderInfo",
    "Lease", "AsyncClient", "AsyncLock", "AsyncSemaphore", "AsyncReadWriteLock", "AsyncElection", "AsyncLease",
    "AcquireContext",
]

__version__: str

def _close_all() -> None:
    """Closes every live client of this process (registered with ``atexit``)."""

def _flush_telemetry() -> None:
    """Hands every queued telemetry event to ``logging`` and the sink now (registered with ``atexit``)."""

def _set_telemetry_sink(
    sink: Optional[Callable[[List[Tuple[str, float, Dict[str, str]]], List[Tuple[str, int, int, Dict[str, str], Optional[str]]]], None]], /
) -> None:
    """Sets (``None``: removes) the callable every client's telemetry is handed to (``lockgate.otel``)."""

def _metric_totals() -> List[Tuple[str, float, Dict[str, str]]]:
    """Every counter's and up-down counter's total since the sink was set, as ``(instrument, total, attributes)``."""

def _metric_instruments() -> List[Tuple[str, str, str, str]]:
    """Every metric instrument as ``(name, kind, unit, description)``, kind ``histogram``, ``counter`` or ``up_down_counter``."""

_Option = Union[str, float, bool, bytes, "os.PathLike[str]", None]
"""A client option's value: every backend's options pass through to lockgate's core."""

class LockError(Exception):
    """Base class of every lockgate error."""

    code: str
    """The stable, language-neutral error code ("TIMEOUT", "NOT_HELD", ...)."""
    retryable: bool
    """Whether the same call may succeed if tried again later."""

class InvalidArgumentError(LockError, ValueError):
    """An argument was rejected before any network call. Also a ValueError."""

class LockTimeoutError(LockError, TimeoutError):
    """The wait for the lock ran out. Also a TimeoutError; retryable."""

class NotHeldError(LockError):
    """The lease is not (or no longer) held: expired, taken over, deleted or released."""

class LockConnectionError(LockError):
    """The server could not be reached or the connection broke; retryable."""

class AuthenticationError(LockError):
    """The server refused the credentials."""

class ProtocolError(LockError):
    """The server replied with something the lock protocol does not allow."""

class LockCancelledError(LockError):
    """The operation was cancelled."""

class ClientClosedError(LockError):
    """The client was closed (or belongs to another process)."""

class AlreadyHeldError(LockError, RuntimeError):
    """This non-reentrant lock handle already holds the lock. Also a RuntimeError."""

class UnsupportedError(LockError):
    """The client's backend cannot do this (see ``Client.capabilities``)."""

# What the classes of both APIs share (the leading underscore: not to be used by name).

@disjoint_base
class _ClientBase:
    @property
    def url(self) -> str:
        """The URL with passwords replaced by ``***``."""
    @property
    def key_prefix(self) -> Optional[str]:
        """The prefix of every key and channel this client uses (``None``: the backend has no keys to prefix)."""
    @property
    def capabilities(self) -> dict[str, bool]:
        """What this client's backend can do, by name."""

@disjoint_base
class _LockBase:
    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def lease(self) -> float:
        """The lease length in seconds."""
    @property
    def renew(self) -> bool:
        """Whether a watchdog renews the lease until it is released."""
    @property
    def wait(self) -> Optional[float]:
        """The default wait in seconds (``None``: until acquired)."""
    @property
    def entry_ttl(self) -> float:
        """How long a waiter's queue entry survives without a heartbeat, in seconds."""
    @property
    def reentrant(self) -> bool:
        """Whether acquiring again while this handle holds the lock adds a hold."""
    def owned(self) -> bool:
        """Whether this handle holds the lock now."""
    def locked(self) -> bool:
        """Whether this handle holds the lock now (does not ask about other clients)."""

@disjoint_base
class _ReadWriteLockBase:
    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def writers_first(self) -> bool:
        """Whether a queued writer blocks readers that arrive after it."""
    @property
    def reentrant(self) -> bool:
        """Whether both halves are reentrant."""

@disjoint_base
class _ElectionBase:
    @property
    def name(self) -> str:
        """The election's name."""
    @property
    def lease(self) -> float:
        """The leader's lease length in seconds."""
    @property
    def renew(self) -> bool:
        """Whether a watchdog renews the leader's lease until it resigns."""
    @property
    def entry_ttl(self) -> float:
        """How long a candidate's queue entry survives without a heartbeat, in seconds."""

@disjoint_base
class _LeaseBase:
    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def fencing_token(self) -> Optional[int]:
        """Larger than every token issued before for this name; ``None`` on Redlock."""
    @property
    def is_held(self) -> bool:
        """Whether the lease is certainly still held now."""
    @property
    def remaining(self) -> Optional[float]:
        """Seconds the lease is certainly still valid, or ``None``."""
    @property
    def at_risk(self) -> bool:
        """Whether the lease is held but cannot be confirmed now (valid only for ``remaining``)."""
    @property
    def lost_reason(self) -> Optional[LockError]:
        """Why the lease was lost, or ``None``."""
    def on_lost(self, callback: Callable[[LockError], object]) -> None:
        """Calls ``callback(reason)`` once if the lease is lost, after the loss's WARNING record."""
    def on_at_risk(self, callback: Callable[[], object]) -> None:
        """Calls ``callback()`` once per spell at risk (at once if at risk now)."""

@final
class LeaderInfo:
    """The current leader of an election, as ``observe()`` sees it."""

    @property
    def value(self) -> str:
        """The value the leader published when it campaigned."""
    @property
    def term(self) -> int:
        """The leader's term: its lease's fencing token."""
    @property
    def remaining(self) -> float:
        """Seconds left on the leader's lease on the server when observed."""

# Blocking API (lockgate)

@final
class Client(_ClientBase):
    """A client of one lock service, for every backend (the URL's scheme picks it)."""

    def __new__(cls, url: str, **options: _Option) -> Self: ...
    def lock(self, name: str, lease: Optional[float] = None, *, renew: Optional[bool] = None, wait: Optional[float] = None,
             entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None, reentrant: bool = False, timeout: None = None) -> Lock:
        """A distributed mutex named ``name``. ``timeout=`` is refused (``TypeError``): redis-py's
        ``timeout`` is the lease, here ``lease=``; the wait is ``acquire(timeout=)`` or ``wait=``.
        ``min_hold``: a release sooner than this after the grant leaves the lock held on the server
        until then (``UnsupportedError`` on ZooKeeper and etcd); ``max_hold``: the lease is not
        renewed past this long after the grant and is lost then (loss reason ``max_hold``)."""
    def semaphore(self, name: str, permits: int, lease: Optional[float] = None, *, renew: Optional[bool] = None,
                  wait: Optional[float] = None, entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None, timeout: None = None) -> Semaphore:
        """A counting semaphore with ``permits`` permits."""
    def read_write_lock(self, name: str, lease: Optional[float] = None, *, renew: Optional[bool] = None, wait: Optional[float] = None,
                        entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None, writers_first: bool = True, reentrant: bool = False,
                        timeout: None = None) -> ReadWriteLock:
        """A read-write lock: many readers or one writer."""
    def election(self, name: str, lease: Optional[float] = None, *, renew: Optional[bool] = None,
                 entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None) -> Election:
        """A leader election named ``name``."""
    def inspect(self, name: str, kind: str = "mutex") -> dict[str, Any]:
        """Reads lock ``name`` as ``kind`` (mutex, rw, semaphore, election): its holders and waiters
        (racy: for humans and dashboards; to decide whether to write, use the fencing token)."""
    def break_lock(self, name: str, token: Optional[int] = None, *, kind: str = "mutex") -> Optional[dict[str, Any]]:
        """Breaks lock ``name``: removes its holder's entry (only the one whose fencing token is ``token``
        when given) and wakes the next waiter; returns what it removed (``label``, ``fencing_token``) or None."""
    def list_locks(self, prefix: str = "", limit: Optional[int] = None, cursor: Optional[str] = None) -> dict[str, Any]:
        """One page of the locks under ``prefix``: ``entries`` (name, kind, holders, waiters, label) and
        ``cursor`` for the next page (``None``: the last). ``limit`` defaults to 100, capped to 1,000."""
    def adopt(self, identity: str, lease: Optional[float] = None, *, renew: Optional[bool] = None) -> Lease:
        """Adopts the lease ``identity`` names (``Lease.identity()`` of another process): the same hold and
        fencing token, no second grant. ``NotHeldError`` if it is no longer current."""
    def close(self) -> None:
        """Releases every lease and cancels every wait of this client."""
    def __enter__(self) -> Self: ...
    def __exit__(self, _exc_type: Optional[type[BaseException]], _exc: Optional[BaseException] = None,
                 _tb: Optional[TracebackType] = None) -> None: ...

@disjoint_base
class Lock(_LockBase):
    """A named distributed mutex (also a read-write lock half, and the base of Semaphore)."""

    def acquire(self, timeout: Optional[float] = None) -> Lease:
        """Waits up to ``timeout`` seconds and returns the lease."""
    def try_acquire(self) -> Optional[Lease]:
        """One attempt without waiting: a lease, or ``None``."""
    def inspect(self) -> dict[str, Any]:
        """Reads this lock's holders and waiters on the server (racy: for humans and dashboards)."""
    def is_locked(self) -> bool:
        """Whether anyone holds this lock now, asking the server (racy: for humans and dashboards)."""
    def release(self) -> bool:
        """Releases the most recent lease acquired through this handle."""
    def extend(self, seconds: float) -> None:
        """Sets the remaining time of the most recent lease this handle holds."""
    def cancel(self) -> None:
        """Cancels every acquire waiting on this handle now, from any thread; returns once
        their queue entries are gone from the server."""
    def __enter__(self) -> Lease: ...
    def __exit__(self, exc_type: Optional[type[BaseException]], _exc: Optional[BaseException] = None,
                 _tb: Optional[TracebackType] = None) -> None: ...

@final
class Semaphore(Lock):
    """A counting semaphore; each ``acquire`` takes one permit as a :class:`Lease`."""

    @property
    def permits(self) -> int:
        """How many leases may be held at once."""

@final
class ReadWriteLock(_ReadWriteLockBase):
    """A read-write lock, made by :meth:`Client.read_write_lock`."""

    @property
    def read_lock(self) -> Lock:
        """The shared half."""
    @property
    def write_lock(self) -> Lock:
        """The exclusive half."""

@final
class Election(_ElectionBase):
    """A leader election, made by :meth:`Client.election`."""

    def campaign(self, value: str, timeout: Optional[float] = None) -> Lease:
        """Waits to become leader (publishing ``value``); the leadership lease."""
    def try_campaign(self, value: str) -> Optional[Lease]:
        """One attempt without waiting: the leadership lease, or ``None``."""
    def observe(self) -> Optional[LeaderInfo]:
        """The current leader, or ``None``."""
    def inspect(self) -> dict[str, Any]:
        """The leader (a holder with its ``value``) and the other candidates in queue order."""

@final
class Lease(_LeaseBase):
    """Proof of holding a lock, a permit or a leadership."""

    def extend(self, seconds: float) -> None:
        """Sets the remaining lease to ``seconds`` if still held."""
    def identity(self) -> str:
        """This lease's identity, for another process to ``Client.adopt`` (a secret: never log it)."""
    def release(self) -> bool:
        """Releases the lock; ``True`` if it was still held."""
    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: Optional[type[BaseException]], _exc: Optional[BaseException] = None,
                 _tb: Optional[TracebackType] = None) -> None: ...

# asyncio API (re-exported by lockgate.aio without the "Async" prefix)

@final
class AsyncClient(_ClientBase):
    """The asyncio client (``lockgate.aio.Client``); connects on first use."""

    def __new__(cls, url: str, **options: _Option) -> Self: ...
    def lock(self, name: str, lease: Optional[float] = None, *, renew: Optional[bool] = None, wait: Optional[float] = None,
             entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None, reentrant: bool = False, timeout: None = None) -> AsyncLock:
        """A distributed mutex named ``name``. ``timeout=`` is refused (``TypeError``): redis-py's
        ``timeout`` is the lease, here ``lease=``; the wait is ``acquire(timeout=)`` or ``wait=``.
        ``min_hold``: a release sooner than this after the grant leaves the lock held on the server
        until then (``UnsupportedError`` on ZooKeeper and etcd); ``max_hold``: the lease is not
        renewed past this long after the grant and is lost then (loss reason ``max_hold``)."""
    def semaphore(self, name: str, permits: int, lease: Optional[float] = None, *, renew: Optional[bool] = None,
                  wait: Optional[float] = None, entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None, timeout: None = None) -> AsyncSemaphore:
        """A counting semaphore with ``permits`` permits."""
    def read_write_lock(self, name: str, lease: Optional[float] = None, *, renew: Optional[bool] = None, wait: Optional[float] = None,
                        entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None, writers_first: bool = True, reentrant: bool = False,
                        timeout: None = None) -> AsyncReadWriteLock:
        """A read-write lock: many readers or one writer."""
    def election(self, name: str, lease: Optional[float] = None, *, renew: Optional[bool] = None,
                 entry_ttl: Optional[float] = None,
             min_hold: Optional[float] = None, max_hold: Optional[float] = None) -> AsyncElection:
        """A leader election named ``name``."""
    def inspect(self, name: str, kind: str = "mutex") -> Coroutine[Any, Any, dict[str, Any]]:
        """Reads lock ``name`` as ``kind`` (mutex, rw, semaphore, election): its holders and waiters
        (racy: for humans and dashboards; to decide whether to write, use the fencing token)."""
    def break_lock(self, name: str, token: Optional[int] = None, *, kind: str = "mutex") -> Coroutine[Any, Any, Optional[dict[str, Any]]]:
        """Breaks lock ``name``: removes its holder's entry (only the one whose fencing token is ``token``
        when given) and wakes the next waiter; returns what it removed (``label``, ``fencing_token``) or None."""
    def list_locks(self, prefix: str = "", limit: Optional[int] = None,
                   cursor: Optional[str] = None) -> Coroutine[Any, Any, dict[str, Any]]:
        """One page of the locks under ``prefix``: ``entries`` (name, kind, holders, waiters, label) and
        ``cursor`` for the next page (``None``: the last). ``limit`` defaults to 100, capped to 1,000."""
    def adopt(self, identity: str, lease: Optional[float] = None, *,
              renew: Optional[bool] = None) -> Coroutine[Any, Any, AsyncLease]:
        """Adopts the lease ``identity`` names (``Lease.identity()`` of another process): the same hold and
        fencing token, no second grant. ``NotHeldError`` if it is no longer current."""
    def connect(self) -> Coroutine[Any, Any, None]:
        """Connects now (otherwise the first operation does)."""
    def close(self) -> Coroutine[Any, Any, None]:
        """Releases every lease and cancels every wait of this client."""
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(self, _exc_type: Optional[type[BaseException]], _exc: Optional[BaseException] = None,
                  _tb: Optional[TracebackType] = None) -> Awaitable[None]: ...

@disjoint_base
class AsyncLock(_LockBase):
    """A named distributed mutex for asyncio (``lockgate.aio.Lock``)."""

    def acquire(self, timeout: Optional[float] = None) -> AcquireContext:
        """Await for a lease, or use with ``async with``."""
    def try_acquire(self) -> Coroutine[Any, Any, Optional[AsyncLease]]:
        """One attempt without waiting: a lease, or ``None``."""
    def inspect(self) -> Coroutine[Any, Any, dict[str, Any]]:
        """Reads this lock's holders and waiters on the server (racy: for humans and dashboards)."""
    def is_locked(self) -> Coroutine[Any, Any, bool]:
        """Whether anyone holds this lock now, asking the server (racy: for humans and dashboards)."""
    def release(self) -> Coroutine[Any, Any, bool]:
        """Releases the most recent lease acquired through this handle."""
    def extend(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sets the remaining time of the most recent lease this handle holds."""
    def __aenter__(self) -> Awaitable[AsyncLease]: ...
    def __aexit__(self, exc_type: Optional[type[BaseException]], _exc: Optional[BaseException] = None,
                  _tb: Optional[TracebackType] = None) -> Awaitable[None]: ...

@final
class AsyncSemaphore(AsyncLock):
    """A counting semaphore for asyncio (``lockgate.aio.Semaphore``)."""

    @property
    def permits(self) -> int:
        """How many leases may be held at once."""

@final
class AsyncReadWriteLock(_ReadWriteLockBase):
    """A read-write lock for asyncio (``lockgate.aio.ReadWriteLock``)."""

    @property
    def read_lock(self) -> AsyncLock:
        """The shared half."""
    @property
    def write_lock(self) -> AsyncLock:
        """The exclusive half."""

@final
class AsyncElection(_ElectionBase):
    """A leader election for asyncio (``lockgate.aio.Election``)."""

    def campaign(self, value: str, timeout: Optional[float] = None) -> AcquireContext:
        """Await for the leadership lease, or use with ``async with`` to resign on exit."""
    def try_campaign(self, value: str) -> Coroutine[Any, Any, Optional[AsyncLease]]:
        """One attempt without waiting: the leadership lease, or ``None``."""
    def observe(self) -> Coroutine[Any, Any, Optional[LeaderInfo]]:
        """The current leader, or ``None``."""
    def inspect(self) -> Coroutine[Any, Any, dict[str, Any]]:
        """The leader (a holder with its ``value``) and the other candidates in queue order."""

@final
class AcquireContext(Coroutine[Any, Any, AsyncLease]):
    """What ``acquire`` and ``campaign`` return: awaitable, and an async context manager."""

    def __await__(self) -> Generator[Any, None, AsyncLease]: ...
    def __next__(self) -> Any: ...
    def send(self, value: Any, /) -> Any:
        """Starts the acquisition on the first call, then resumes it (``coroutine.send``)."""
    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any:
        """Abandons the acquisition and raises the exception (``coroutine.throw``)."""
    def close(self) -> None:
        """Abandons the acquisition, or makes sure it never starts (``coroutine.close``)."""
    def __aenter__(self) -> Awaitable[AsyncLease]: ...
    def __aexit__(self, exc_type: Optional[type[BaseException]], _exc: Optional[BaseException] = None,
                  _tb: Optional[TracebackType] = None) -> Awaitable[None]: ...

@final
class AsyncLease(_LeaseBase):
    """Proof of holding a lock, a permit or a leadership (``lockgate.aio.Lease``)."""

    def extend(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sets the remaining lease to ``seconds`` if still held."""
    def identity(self) -> Coroutine[Any, Any, str]:
        """This lease's identity, for another process to ``Client.adopt`` (a secret: never log it)."""
    def release(self) -> Coroutine[Any, Any, bool]:
        """Releases the lock; ``True`` if it was still held."""
    def lost(self) -> Coroutine[Any, Any, Optional[LockError]]:
        """Resolves with the reason when the lease is lost, ``None`` once released."""
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(self, exc_type: Optional[type[BaseException]], _exc: Optional[BaseException] = None,
                  _tb: Optional[TracebackType] = None) -> Awaitable[None]: ...
