"""Telemetry through Python's standard ``logging`` (logger ``lockgate``), read with pytest's
``caplog`` on a real Redis: a contended lock with a waiter that gets it, a waiter that times
out and a loss forced by deleting the lock. The records come from the core's events (one
vocabulary for every backend): their levels, messages and ``extra`` fields, and never the
password of the URL."""

from __future__ import annotations

import ctypes
import logging
import threading
import time

import pytest

import lockgate
from conftest import RedisServer, lock_key, wait_until


def _events(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "lockgate"]


def test_a_contended_lock_is_logged_with_extra_fields(acl_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="lockgate")
    url = f"redis://app:s3cret-pw@127.0.0.1:{acl_server.port}"
    raw = acl_server.raw(username="app", password="s3cret-pw")
    with lockgate.Client(url) as a_client, lockgate.Client(url) as b_client, lockgate.Client(url) as c_client:
        a = a_client.lock("tel", 3, renew=True).try_acquire()
        assert a is not None
        got: list[lockgate.Lease] = []
        waiter = threading.Thread(target=lambda: got.append(b_client.lock("tel", 3, renew=True).acquire(timeout=10)))
        waiter.start()
        with pytest.raises(lockgate.LockTimeoutError):
            c_client.lock("tel", 3, renew=True).acquire(timeout=0.3)
        assert a.release()
        waiter.join(5)
        (b,) = got
        lost: list[lockgate.LockError] = []
        b.on_lost(lost.append)
        raw.delete(lock_key("tel"))
        wait_until(lambda: lost, what="the loss")
        wait_until(lambda: any(r.lockgate_event == "lease.lost" for r in _events(caplog)), what="the loss's record")

    records = _events(caplog)
    seen = [(r.levelno, r.lockgate_event) for r in records]
    count = {name: sum(1 for _, e in seen if e == name) for name in {e for _, e in seen}}
    # A release at close may add lease.released records for what was still held: none here.
    assert count == {
        "acquire.started": 3,
        "acquire.granted": 2,
        "acquire.timed_out": 1,
        "lease.released": 1,
        "lease.lost": 1,
    }, seen
    for r in records:
        assert r.levelno == (logging.WARNING if r.lockgate_event == "lease.lost" else logging.DEBUG), seen
        assert (r.lockgate_backend, r.lockgate_primitive) == ("redis", "mutex")
        assert not hasattr(r, "lockgate_lock"), "lock names are off by default"
        assert "s3cret-pw" not in repr(r.__dict__), r.__dict__
    granted = [r for r in records if r.lockgate_event == "acquire.granted"]
    assert [r.lockgate_queued for r in granted] == [False, True]
    assert granted[1].lockgate_wait_s >= 0.29  # b waited behind a past c's 300 ms timeout
    (timed_out,) = [r for r in records if r.lockgate_event == "acquire.timed_out"]
    assert 0.3 <= timed_out.lockgate_wait_s < 2.0
    assert timed_out.getMessage() == "acquire timed out"
    (lost_record,) = [r for r in records if r.lockgate_event == "lease.lost"]
    assert lost_record.lockgate_reason == "refused"
    assert lost_record.getMessage() == "lock lost"
    (released,) = [r for r in records if r.lockgate_event == "lease.released"]
    assert released.lockgate_held_s >= 0.29


def test_only_warnings_without_configuration(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # The root logger's default level (WARNING): DEBUG records are not even made.
    caplog.set_level(logging.WARNING)
    with lockgate.Client(server.url) as client:
        lease = client.lock("quiet", 3, renew=True).acquire(timeout=5)
        # The callback finds the loss's record made already (the record first, then the call).
        lost: list[tuple[lockgate.LockError, list[str]]] = []
        lease.on_lost(lambda reason: lost.append((reason, [r.lockgate_event for r in _events(caplog)])))
        server.raw().delete(lock_key("quiet"))
        wait_until(lambda: lost, what="the loss")
        assert lost[0][1] == ["lease.lost"], lost
        time.sleep(0.05)
    assert [(r.levelno, r.lockgate_event) for r in _events(caplog)] == [(logging.WARNING, "lease.lost")]


def test_lock_names_only_when_asked_for(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="lockgate")
    with pytest.raises(lockgate.InvalidArgumentError, match="telemetry_lock_names"):
        lockgate.Client(server.url, telemetry_lock_names="yes")
    with lockgate.Client(server.url, telemetry_lock_names=True) as client:
        client.lock("orders:42", 3).acquire(timeout=5).release()
    assert [(r.lockgate_event, r.lockgate_lock) for r in _events(caplog)] == [
        ("acquire.started", "orders:42"),
        ("acquire.granted", "orders:42"),
        ("lease.released", "orders:42"),
    ]


def test_a_lease_held_too_long_is_logged_once_while_held(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="lockgate")
    with pytest.raises(lockgate.InvalidArgumentError, match="held_too_long"):
        lockgate.Client(server.url, held_too_long=0)
    with lockgate.Client(server.url, held_too_long=0.2) as client:
        lease = client.lock("stuck", 3, renew=True).acquire(timeout=5)
        wait_until(lambda: _events(caplog), what="the held-too-long record")
        time.sleep(0.3)
        assert lease.is_held
        lease.release()
    (record,) = _events(caplog)
    assert (record.levelno, record.lockgate_event, record.getMessage()) == (
        logging.WARNING,
        "lease.held_too_long",
        "lock held longer than held_too_long",
    )
    assert 0.2 <= record.lockgate_held_s < 2.0


def test_records_go_through_the_record_factory_and_the_level_of_the_moment(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # A record is made by the logger's makeRecord (the application's record factory applies),
    # with the location Python gives a record that has no caller (the events come from the
    # core); and a level raised takes effect at the next call, not at the next periodic check.
    caplog.set_level(logging.DEBUG, logger="lockgate")
    made: list[str] = []
    factory = logging.getLogRecordFactory()

    def counting(*args: object, **kwargs: object) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        made.append(record.getMessage())
        return record

    logging.setLogRecordFactory(counting)
    try:
        with lockgate.Client(server.url) as client:
            lock = client.lock("factory", 3)
            lock.acquire(timeout=5).release()
            assert [r.lockgate_event for r in _events(caplog)] == ["acquire.started", "acquire.granted", "lease.released"]
            assert made == [r.getMessage() for r in _events(caplog)]
            for r in _events(caplog):
                assert (r.pathname, r.lineno, r.funcName) == ("(unknown file)", 0, "(unknown function)")
            caplog.clear()
            made.clear()
            logging.getLogger("lockgate").setLevel(logging.INFO)
            lock.acquire(timeout=5).release()
            assert _events(caplog) == [] and made == []
    finally:
        logging.setLogRecordFactory(factory)


def test_records_are_made_on_python_threads_in_order(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # A call's records are made on its own thread before it returns (the driver never waits for
    # the GIL), in the order the core raised them; a loss between calls is logged on the
    # telemetry thread without any call.
    caplog.set_level(logging.DEBUG, logger="lockgate")
    with lockgate.Client(server.url) as client:
        for _ in range(20):
            client.lock("order", 3).acquire(timeout=5).release()
        made_on = {r.threadName for r in _events(caplog)}
        assert made_on == {threading.current_thread().name}, made_on
        assert [r.lockgate_event for r in _events(caplog)] == ["acquire.started", "acquire.granted", "lease.released"] * 20
        caplog.clear()
        lease = client.lock("order", 3, renew=True).acquire(timeout=5)
        caplog.clear()
        server.raw().delete(lock_key("order"))
        wait_until(lambda: any(r.lockgate_event == "lease.lost" for r in _events(caplog)), what="the loss's record")
        assert not lease.is_held
    (lost,) = [r for r in caplog.records if r.name == "lockgate" and r.lockgate_event == "lease.lost"]
    assert lost.threadName != threading.current_thread().name


def test_a_thread_holding_the_gil_never_stalls_a_lease(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # The driver never waits for the GIL: not even to ask whether DEBUG records are wanted once
    # its last answer is stale. A thread holding the GIL for 3 s (a C call through
    # ctypes.PyDLL keeps it) while the driver has an event to tell (a waiter timing out, over a
    # second after the last level check) must not stop the renewals of a 0.5 s lease.
    caplog.set_level(logging.DEBUG, logger="lockgate")
    libc = ctypes.PyDLL(None)
    with lockgate.Client(server.url) as client, lockgate.Client(server.url) as other:
        lease = client.lock("gil", 0.5, renew=True).acquire(timeout=5)
        busy = other.lock("gil-busy", 10).acquire(timeout=5)
        timed_out: list[bool] = []

        def wait() -> None:
            with pytest.raises(lockgate.LockTimeoutError):
                client.lock("gil-busy", 10).acquire(timeout=3.0)
            timed_out.append(True)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(1.2)
        libc.usleep(3_000_000)  # the GIL held from 1.2 s to 4.2 s; the waiter times out at 3 s
        waiter.join(5)
        assert timed_out, "the waiter did not time out"
        assert lease.is_held, lease.lost_reason
        assert lease.release()
        busy.release()
    assert any(r.lockgate_event == "acquire.timed_out" for r in _events(caplog))
