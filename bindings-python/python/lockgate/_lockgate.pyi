"""Type stubs of the compiled module (checked by ``python -m mypy.stubtest lockgate``)."""

import os
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from types import TracebackType
from typing import Any, Optional, Union

from typing_extensions import Self, disjoint_base, final

__all__ = [
    "__version__",
    "LockError",
    "InvalidArgumentError",
    "LockTimeoutError",
    "NotHeldError",
    "LockConnectionError",
    "AuthenticationError",
    "ProtocolError",
    "LockCancelledError",
    "ClientClosedError",
    "AlreadyHeldError",
    "Client",
    "Lock",
    "Semaphore",
    "ReadWriteLock",
    "Election",
    "LeaderInfo",
    "Lease",
    "Redlock",
    "RedlockLock",
    "RedlockLease",
    "AsyncClient",
    "AsyncLock",
    "AsyncSemaphore",
    "AsyncReadWriteLock",
    "AsyncElection",
    "AsyncLease",
    "AcquireContext",
    "AsyncRedlock",
    "AsyncRedlockLock",
    "AsyncRedlockLease",
    "RedlockAcquireContext",
    "_close_all",
]

__version__: str

def _close_all() -> None:
    """Closes every live client of this process (registered with ``atexit``)."""

_Path = Union[str, "os.PathLike[str]"]

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
    """This non-reentrant lock handle already holds the lock: acquiring again through it fails
    at once instead of waiting for itself. Also a RuntimeError."""

# ---------------------------------------------------------------------------------------------
# Blocking API
# ---------------------------------------------------------------------------------------------

@final
class Client:
    """A connection to one Redis server (or one Redis Cluster), shared by every lock made from it."""

    def __new__(
        cls,
        url: str,
        *,
        key_prefix: Optional[str] = None,
        tls_ca_file: Optional[_Path] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
        cluster: bool = False,
        replica_acks: Optional[int] = None,
        replica_ack_timeout: Optional[float] = None,
    ) -> Self:
        """Connect to ``url``; ``cluster=True``: a seed node of a Redis Cluster;
        ``replica_acks=n``: grants count only once ``WAIT`` confirms ``n`` replicas within
        ``replica_ack_timeout`` seconds (default 1)."""
    def lock(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
        entry_ttl: Optional[float] = None,
        reentrant: bool = False,
    ) -> Lock:
        """A distributed mutex named ``name`` (``reentrant=True``: re-acquiring through this
        handle while it holds the lock adds a hold)."""
    def semaphore(
        self,
        name: str,
        permits: int,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
        entry_ttl: Optional[float] = None,
    ) -> Semaphore:
        """A distributed counting semaphore with ``permits`` permits."""
    def read_write_lock(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
        entry_ttl: Optional[float] = None,
        writers_first: bool = True,
        reentrant: bool = False,
    ) -> ReadWriteLock:
        """A distributed read-write lock: many readers or one writer."""
    def election(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        entry_ttl: Optional[float] = None,
    ) -> Election:
        """A leader election named ``name``."""
    def close(self) -> None:
        """Releases every lease and cancels every wait of this client."""
    @property
    def url(self) -> str:
        """The server URL with the password replaced by ``***``."""
    @property
    def key_prefix(self) -> str:
        """The prefix of every key and channel this client uses."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> None: ...

@disjoint_base
class Lock:
    """A named distributed mutex, made by :meth:`Client.lock` (also a read-write lock half)."""

    def acquire(self, timeout: Optional[float] = None) -> Lease:
        """Waits up to ``timeout`` seconds and returns the lease."""
    def try_acquire(self) -> Optional[Lease]:
        """One attempt without waiting: a lease, or ``None``."""
    def release(self) -> bool:
        """Releases the most recent lease acquired through this handle; ``True`` if it was
        still held. ``NotHeldError`` if this handle holds none."""
    def extend(self, seconds: float) -> None:
        """Sets the remaining time of the most recent lease this handle holds."""
    def owned(self) -> bool:
        """Whether this handle holds the lock now."""
    def locked(self) -> bool:
        """Whether this handle holds the lock now (does not ask about other clients)."""
    def cancel(self) -> None:
        """Cancels every acquire waiting on this handle now, from any thread."""
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
    def timeout(self) -> Optional[float]:
        """The default wait in seconds (``None``: forever)."""
    @property
    def entry_ttl(self) -> float:
        """How long a waiter's queue entry survives without a heartbeat, in seconds."""
    @property
    def reentrant(self) -> bool:
        """Whether acquiring again while this handle holds the lock adds a hold."""
    def __enter__(self) -> Lease: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> None: ...

@final
class Semaphore(Lock):
    """A distributed counting semaphore; each ``acquire`` takes one permit as a :class:`Lease`."""

    @property
    def permits(self) -> int:
        """How many leases may be held at once."""

@final
class ReadWriteLock:
    """A distributed read-write lock, made by :meth:`Client.read_write_lock`."""

    @property
    def read_lock(self) -> Lock:
        """The shared half: many readers hold it at once."""
    @property
    def write_lock(self) -> Lock:
        """The exclusive half: one writer, beside no reader."""
    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def writers_first(self) -> bool:
        """Whether a queued writer blocks readers that arrive after it."""
    @property
    def reentrant(self) -> bool:
        """Whether both halves are reentrant."""

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

@final
class Election:
    """A leader election, made by :meth:`Client.election`."""

    def campaign(self, value: str, timeout: Optional[float] = None) -> Lease:
        """Waits to become leader (publishing ``value``); the leadership lease."""
    def try_campaign(self, value: str) -> Optional[Lease]:
        """One attempt without waiting: the leadership lease, or ``None``."""
    def observe(self) -> Optional[LeaderInfo]:
        """The current leader, or ``None``."""
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

@final
class Lease:
    """Proof of holding a lock."""

    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def fencing_token(self) -> int:
        """Strictly greater than every fencing token issued before for this lock name."""
    @property
    def is_held(self) -> bool:
        """Whether the lease is certainly still held now."""
    @property
    def remaining(self) -> Optional[float]:
        """Seconds the lease is certainly still valid, or ``None``."""
    @property
    def lost_reason(self) -> Optional[LockError]:
        """Why the lease was lost, or ``None``."""
    def extend(self, seconds: float) -> None:
        """Sets the remaining lease to ``seconds`` if still held."""
    def release(self) -> bool:
        """Releases the lock; ``True`` if it was still held."""
    def on_lost(self, callback: Callable[[LockError], object]) -> None:
        """Calls ``callback(reason)`` on a background thread if the lease is lost."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> None: ...

# ---------------------------------------------------------------------------------------------
# Redlock over N independent masters (PROTOCOL.md §8); grants carry no fencing token
# ---------------------------------------------------------------------------------------------

@final
class Redlock:
    """A lock held on a majority of N independent Redis masters (no fencing tokens)."""

    def __new__(
        cls,
        urls: Sequence[str],
        *,
        key_prefix: Optional[str] = None,
        max_lease: Optional[float] = None,
        node_timeout: Optional[float] = None,
        retry_delay: Optional[float] = None,
        retry_jitter: Optional[float] = None,
        drift_factor: Optional[float] = None,
        drift_fixed: Optional[float] = None,
        tls_ca_file: Optional[_Path] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
    ) -> Self:
        """Connect to every reachable master of ``urls`` (independent servers)."""
    def lock(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> RedlockLock:
        """A Redlock named ``name`` (``lease=None``: renewed, 30 s or ``max_lease``)."""
    def close(self) -> None:
        """Releases every lease and cancels every wait of this Redlock."""
    @property
    def urls(self) -> list[str]:
        """The masters' URLs, passwords replaced by ``***``."""
    @property
    def masters(self) -> int:
        """How many masters there are."""
    @property
    def quorum(self) -> int:
        """How many masters must grant a lock: a majority."""
    @property
    def key_prefix(self) -> str:
        """The prefix of every key this Redlock uses."""
    @property
    def max_lease(self) -> float:
        """The longest lease of the deployment, in seconds."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> None: ...

@final
class RedlockLock:
    """A named Redlock, made by :meth:`Redlock.lock`."""

    def acquire(self, timeout: Optional[float] = None) -> RedlockLease:
        """Tries for up to ``timeout`` seconds until a majority grants the lock."""
    def try_acquire(self) -> Optional[RedlockLease]:
        """One attempt: a lease, ``None`` if held; ``LockConnectionError`` if too few voted."""
    def release(self) -> bool:
        """Releases the most recent lease acquired through this handle; ``True`` if it was
        still held. ``NotHeldError`` if this handle holds none."""
    def extend(self, seconds: float) -> None:
        """Sets the remaining time of the most recent lease this handle holds."""
    def owned(self) -> bool:
        """Whether this handle holds the lock now."""
    def locked(self) -> bool:
        """Whether this handle holds the lock now (does not ask about other clients)."""
    def cancel(self) -> None:
        """Cancels every acquire waiting on this handle now, from any thread."""
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
    def timeout(self) -> Optional[float]:
        """The default wait in seconds (``None``: forever)."""
    def __enter__(self) -> RedlockLease: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> None: ...

@final
class RedlockLease:
    """Proof that a majority of the masters holds the lock. No ``fencing_token``: a majority of
    independent masters is not a linearizable counter (PROTOCOL.md §8)."""

    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def is_held(self) -> bool:
        """Whether the lease is certainly still valid now."""
    @property
    def remaining(self) -> Optional[float]:
        """Seconds the lease is certainly still valid, or ``None``."""
    @property
    def lost_reason(self) -> Optional[LockError]:
        """Why the lease was lost, or ``None``."""
    def extend(self, seconds: float) -> None:
        """Sets the remaining lease to ``seconds`` on a majority of masters."""
    def release(self) -> bool:
        """Releases the lock; ``True`` if a majority still held it."""
    def on_lost(self, callback: Callable[[LockError], object]) -> None:
        """Calls ``callback(reason)`` on a background thread if the lease is lost."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> None: ...

# ---------------------------------------------------------------------------------------------
# asyncio API (re-exported by lockgate.aio as Client, Lock, Lease)
# ---------------------------------------------------------------------------------------------

@final
class AsyncClient:
    """The asyncio client (``lockgate.aio.Client``)."""

    def __new__(
        cls,
        url: str,
        *,
        key_prefix: Optional[str] = None,
        tls_ca_file: Optional[_Path] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
        cluster: bool = False,
        replica_acks: Optional[int] = None,
        replica_ack_timeout: Optional[float] = None,
    ) -> Self:
        """Connect to ``url``; ``cluster=True``: a seed node of a Redis Cluster;
        ``replica_acks=n``: grants count only once ``WAIT`` confirms ``n`` replicas within
        ``replica_ack_timeout`` seconds (default 1)."""
    def lock(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
        entry_ttl: Optional[float] = None,
        reentrant: bool = False,
    ) -> AsyncLock:
        """A distributed mutex named ``name``."""
    def semaphore(
        self,
        name: str,
        permits: int,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
        entry_ttl: Optional[float] = None,
    ) -> AsyncSemaphore:
        """A distributed counting semaphore with ``permits`` permits."""
    def read_write_lock(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
        entry_ttl: Optional[float] = None,
        writers_first: bool = True,
        reentrant: bool = False,
    ) -> AsyncReadWriteLock:
        """A distributed read-write lock: many readers or one writer."""
    def election(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        entry_ttl: Optional[float] = None,
    ) -> AsyncElection:
        """A leader election named ``name``."""
    def connect(self) -> Coroutine[Any, Any, None]:
        """Connects now (otherwise the first operation does)."""
    def close(self) -> Coroutine[Any, Any, None]:
        """Releases every lease and cancels every wait of this client."""
    @property
    def url(self) -> str:
        """The server URL with the password replaced by ``***``."""
    @property
    def key_prefix(self) -> str:
        """The prefix of every key and channel this client uses."""
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(
        self,
        _exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...

@disjoint_base
class AsyncLock:
    """A named distributed mutex for asyncio (``lockgate.aio.Lock``)."""

    def acquire(self, timeout: Optional[float] = None) -> AcquireContext:
        """Await for a lease, or use with ``async with``."""
    def try_acquire(self) -> Coroutine[Any, Any, Optional[AsyncLease]]:
        """One attempt without waiting: a lease, or ``None``."""
    def release(self) -> Coroutine[Any, Any, bool]:
        """Releases the most recent lease acquired through this handle; ``True`` if it was
        still held. ``NotHeldError`` if this handle holds none."""
    def extend(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sets the remaining time of the most recent lease this handle holds."""
    def owned(self) -> bool:
        """Whether this handle holds the lock now."""
    def locked(self) -> bool:
        """Whether this handle holds the lock now (does not ask about other clients)."""
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
    def timeout(self) -> Optional[float]:
        """The default wait in seconds (``None``: forever)."""
    @property
    def entry_ttl(self) -> float:
        """How long a waiter's queue entry survives without a heartbeat, in seconds."""
    @property
    def reentrant(self) -> bool:
        """Whether acquiring again while this handle holds the lock adds a hold."""
    def __aenter__(self) -> Awaitable[AsyncLease]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...

@final
class AsyncSemaphore(AsyncLock):
    """A distributed counting semaphore for asyncio (``lockgate.aio.Semaphore``)."""

    @property
    def permits(self) -> int:
        """How many leases may be held at once."""

@final
class AsyncReadWriteLock:
    """A distributed read-write lock for asyncio (``lockgate.aio.ReadWriteLock``)."""

    @property
    def read_lock(self) -> AsyncLock:
        """The shared half: many readers hold it at once."""
    @property
    def write_lock(self) -> AsyncLock:
        """The exclusive half: one writer, beside no reader."""
    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def writers_first(self) -> bool:
        """Whether a queued writer blocks readers that arrive after it."""
    @property
    def reentrant(self) -> bool:
        """Whether both halves are reentrant."""

@final
class AsyncElection:
    """A leader election for asyncio (``lockgate.aio.Election``)."""

    def campaign(self, value: str, timeout: Optional[float] = None) -> AcquireContext:
        """Await for the leadership lease, or use with ``async with`` to resign on exit."""
    def try_campaign(self, value: str) -> Coroutine[Any, Any, Optional[AsyncLease]]:
        """One attempt without waiting: the leadership lease, or ``None``."""
    def observe(self) -> Coroutine[Any, Any, Optional[LeaderInfo]]:
        """The current leader, or ``None``."""
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

@final
class AcquireContext(Coroutine[Any, Any, AsyncLease]):
    """What ``lockgate.aio.Lock.acquire`` returns: awaitable, and an async context manager."""

    def __await__(self) -> Generator[Any, None, AsyncLease]: ...
    def __next__(self) -> Any: ...
    def send(self, value: Any, /) -> Any:
        """Starts the acquisition on the first call, then resumes it (``coroutine.send``)."""
    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any:
        """Abandons the acquisition and raises the exception (``coroutine.throw``)."""
    def close(self) -> None:
        """Abandons the acquisition, or makes sure it never starts (``coroutine.close``)."""
    def __aenter__(self) -> Awaitable[AsyncLease]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...

@final
class AsyncLease:
    """Proof of holding a lock (``lockgate.aio.Lease``)."""

    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def fencing_token(self) -> int:
        """Strictly greater than every fencing token issued before for this lock name."""
    @property
    def is_held(self) -> bool:
        """Whether the lease is certainly still held now."""
    @property
    def remaining(self) -> Optional[float]:
        """Seconds the lease is certainly still valid, or ``None``."""
    @property
    def lost_reason(self) -> Optional[LockError]:
        """Why the lease was lost, or ``None``."""
    def extend(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sets the remaining lease to ``seconds`` if still held."""
    def release(self) -> Coroutine[Any, Any, bool]:
        """Releases the lock; ``True`` if it was still held."""
    def lost(self) -> Coroutine[Any, Any, Optional[LockError]]:
        """Resolves with the reason when the lease is lost, ``None`` once released."""
    def on_lost(self, callback: Callable[[LockError], object]) -> None:
        """Schedules ``callback(reason)`` on the running loop if the lease is lost."""
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...

# ---------------------------------------------------------------------------------------------
# asyncio Redlock (re-exported by lockgate.aio as Redlock, RedlockLock, RedlockLease)
# ---------------------------------------------------------------------------------------------

@final
class AsyncRedlock:
    """Redlock for asyncio (``lockgate.aio.Redlock``); connects on first use."""

    def __new__(
        cls,
        urls: Sequence[str],
        *,
        key_prefix: Optional[str] = None,
        max_lease: Optional[float] = None,
        node_timeout: Optional[float] = None,
        retry_delay: Optional[float] = None,
        retry_jitter: Optional[float] = None,
        drift_factor: Optional[float] = None,
        drift_fixed: Optional[float] = None,
        tls_ca_file: Optional[_Path] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
    ) -> Self:
        """Validate the arguments; the masters are connected on first use."""
    def lock(
        self,
        name: str,
        lease: Optional[float] = None,
        *,
        renew: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> AsyncRedlockLock:
        """A Redlock named ``name``."""
    def connect(self) -> Coroutine[Any, Any, None]:
        """Connects now (otherwise the first operation does)."""
    def close(self) -> Coroutine[Any, Any, None]:
        """Releases every lease and cancels every wait of this Redlock."""
    @property
    def urls(self) -> list[str]:
        """The masters' URLs, passwords replaced by ``***``."""
    @property
    def masters(self) -> int:
        """How many masters there are."""
    @property
    def quorum(self) -> int:
        """How many masters must grant a lock: a majority."""
    @property
    def key_prefix(self) -> str:
        """The prefix of every key this Redlock uses."""
    @property
    def max_lease(self) -> float:
        """The longest lease of the deployment, in seconds."""
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(
        self,
        _exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...

@final
class AsyncRedlockLock:
    """A named Redlock for asyncio (``lockgate.aio.RedlockLock``)."""

    def acquire(self, timeout: Optional[float] = None) -> RedlockAcquireContext:
        """Await for a lease, or use with ``async with``."""
    def try_acquire(self) -> Coroutine[Any, Any, Optional[AsyncRedlockLease]]:
        """One attempt: a lease, ``None`` if held; ``LockConnectionError`` if too few voted."""
    def release(self) -> Coroutine[Any, Any, bool]:
        """Releases the most recent lease acquired through this handle; ``True`` if it was
        still held. ``NotHeldError`` if this handle holds none."""
    def extend(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sets the remaining time of the most recent lease this handle holds."""
    def owned(self) -> bool:
        """Whether this handle holds the lock now."""
    def locked(self) -> bool:
        """Whether this handle holds the lock now (does not ask about other clients)."""
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
    def timeout(self) -> Optional[float]:
        """The default wait in seconds (``None``: forever)."""
    def __aenter__(self) -> Awaitable[AsyncRedlockLease]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...

@final
class RedlockAcquireContext(Coroutine[Any, Any, AsyncRedlockLease]):
    """What ``lockgate.aio.RedlockLock.acquire`` returns: awaitable, and an async context manager."""

    def __await__(self) -> Generator[Any, None, AsyncRedlockLease]: ...
    def __next__(self) -> Any: ...
    def send(self, value: Any, /) -> Any:
        """Starts the acquisition on the first call, then resumes it (``coroutine.send``)."""
    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any:
        """Abandons the acquisition and raises the exception (``coroutine.throw``)."""
    def close(self) -> None:
        """Abandons the acquisition, or makes sure it never starts (``coroutine.close``)."""
    def __aenter__(self) -> Awaitable[AsyncRedlockLease]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...

@final
class AsyncRedlockLease:
    """Proof that a majority of the masters holds the lock (``lockgate.aio.RedlockLease``).
    No ``fencing_token`` (PROTOCOL.md §8)."""

    @property
    def name(self) -> str:
        """The lock's name."""
    @property
    def is_held(self) -> bool:
        """Whether the lease is certainly still valid now."""
    @property
    def remaining(self) -> Optional[float]:
        """Seconds the lease is certainly still valid, or ``None``."""
    @property
    def lost_reason(self) -> Optional[LockError]:
        """Why the lease was lost, or ``None``."""
    def extend(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sets the remaining lease to ``seconds`` on a majority of masters."""
    def release(self) -> Coroutine[Any, Any, bool]:
        """Releases the lock; ``True`` if a majority still held it."""
    def lost(self) -> Coroutine[Any, Any, Optional[LockError]]:
        """Resolves with the reason when the lease is lost, ``None`` once released."""
    def on_lost(self, callback: Callable[[LockError], object]) -> None:
        """Schedules ``callback(reason)`` on the running loop if the lease is lost."""
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> Awaitable[None]: ...
