"""Metrics and spans through OpenTelemetry (``lockgate.otel.instrument()``), read with the
OpenTelemetry SDK's in-memory metric reader and span exporter on a real Redis: a contended lock
with a waiter that gets it, a waiter that times out and a loss forced by deleting the lock. The
instruments, attributes and values are the core's (the same in every binding), and no attribute
carries the URL's password."""

from __future__ import annotations

import threading

import pytest

otel_sdk = pytest.importorskip("opentelemetry.sdk")  # installed by ci.sh for the suite

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import lockgate
import lockgate.otel
from conftest import RedisServer, lock_key, wait_until


def _points(reader: InMemoryMetricReader) -> dict:
    """{(metric name, frozenset of attributes): data point} of every metric read now."""
    out = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    out[(m.name, frozenset(p.attributes.items()))] = p
    return out


def test_a_contended_lock_is_measured_and_traced(acl_server: RedisServer) -> None:
    reader = InMemoryMetricReader()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    lockgate.otel.instrument(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracer_provider)
    url = f"redis://app:s3cret-pw@127.0.0.1:{acl_server.port}"
    raw = acl_server.raw(username="app", password="s3cret-pw")
    try:
        with lockgate.Client(url) as a_client, lockgate.Client(url, telemetry_lock_names=True) as b_client, lockgate.Client(url) as c_client:
            a = a_client.lock("otel", 3, renew=True).try_acquire()
            assert a is not None
            got: list[lockgate.Lease] = []
            waiter = threading.Thread(target=lambda: got.append(b_client.lock("otel", 3, renew=True).acquire(timeout=10)))
            waiter.start()
            with pytest.raises(lockgate.LockTimeoutError):
                c_client.lock("otel", 3, renew=True).acquire(timeout=0.3)
            assert a.release()
            waiter.join(5)
            (b,) = got
            lost: list[lockgate.LockError] = []
            b.on_lost(lost.append)
            raw.delete(lock_key("otel"))
            wait_until(lambda: lost, what="the loss")
            base = {("lockgate.backend", "redis"), ("lockgate.primitive", "mutex")}
            named = base | {("lockgate.lock.name", "otel")}
            wait_until(lambda: ("lockgate.lock.losses", frozenset(named | {("lockgate.loss.reason", "refused")})) in _points(reader), what="the loss's count")
    finally:
        lockgate.otel.uninstrument()

    points = _points(reader)
    at = lambda name, attrs: points[(name, frozenset(attrs))]  # noqa: E731
    assert at("lockgate.lock.acquisitions", base | {("lockgate.outcome", "granted")}).value == 1  # a
    assert at("lockgate.lock.acquisitions", named | {("lockgate.outcome", "granted")}).value == 1  # b, named
    assert at("lockgate.lock.acquisitions", base | {("lockgate.outcome", "timed_out")}).value == 1
    timed = at("lockgate.lock.wait.duration", base | {("lockgate.outcome", "timed_out")})
    assert timed.count == 1 and 0.3 <= timed.sum < 2.0
    waited = at("lockgate.lock.wait.duration", named | {("lockgate.outcome", "granted")})
    assert waited.count == 1 and waited.sum >= 0.29
    assert at("lockgate.lock.hold.duration", base | {("lockgate.outcome", "released")}).count == 1
    assert at("lockgate.lock.hold.duration", named | {("lockgate.outcome", "lost")}).count == 1
    assert at("lockgate.lock.losses", named | {("lockgate.loss.reason", "refused")}).value == 1
    # Up-down counters: everything taken was given back (a released, b lost; no wait left).
    assert at("lockgate.lock.held", base).value == 0 and at("lockgate.lock.held", named).value == 0
    assert at("lockgate.lock.waiting", base).value == 0 and at("lockgate.lock.waiting", named).value == 0
    for (name, attrs), _ in points.items():
        assert name.startswith("lockgate."), name
        assert "s3cret-pw" not in repr(attrs)

    finished = spans.get_finished_spans()
    outcomes = sorted(dict(s.attributes)["lockgate.outcome"] for s in finished)
    assert outcomes == ["granted", "granted", "timed_out"], outcomes
    (timed_span,) = [s for s in finished if s.attributes["lockgate.outcome"] == "timed_out"]
    assert timed_span.name == "lockgate.acquire"
    assert timed_span.status.status_code == StatusCode.ERROR
    assert 0.3e9 <= timed_span.end_time - timed_span.start_time < 2e9
    for s in finished:
        assert "s3cret-pw" not in repr(dict(s.attributes))


def test_nothing_is_recorded_once_uninstrumented(server: RedisServer) -> None:
    reader = InMemoryMetricReader()
    lockgate.otel.instrument(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    lockgate.otel.uninstrument()
    with lockgate.Client(server.url) as client:
        assert client.lock("quiet-otel").acquire(timeout=5).release()
    assert not any(v.value for (name, _), v in _points(reader).items() if name == "lockgate.lock.acquisitions")


def test_acquire_spans_are_roots_whatever_span_is_current(server: RedisServer) -> None:
    # The records are made by whichever thread hands the queued events on: the caller's span
    # would be a guess, so the acquire span is a root.
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    lockgate.otel.instrument(meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]), tracer_provider=tracer_provider)
    try:
        with lockgate.Client(server.url) as client, tracer_provider.get_tracer("app").start_as_current_span("caller"):
            client.lock("root-span", 3).acquire(timeout=5).release()
    finally:
        lockgate.otel.uninstrument()
    (acquire,) = [s for s in spans.get_finished_spans() if s.name == "lockgate.acquire"]
    assert acquire.parent is None


def test_a_new_sink_gets_nothing_raised_under_the_one_before(server: RedisServer) -> None:
    # A release's events are handed on once the client's driver is idle, after the call
    # returned: setting another sink at once finds them queued. They were the old sink's; the
    # new one's counts start at zero and it gets no sample or span of theirs.
    from lockgate import _lockgate

    first: list = []
    second: list = []
    _lockgate._set_telemetry_sink(lambda samples, spans: first.append((samples, spans)))
    try:
        with lockgate.Client(server.url) as client:
            lock = client.lock("sink-replaced")
            for _ in range(5):
                lock.acquire(timeout=5).release()
            _lockgate._set_telemetry_sink(lambda samples, spans: second.append((samples, spans)))
            threading.Event().wait(0.1)  # the telemetry thread's grace (20 ms) passed
            _lockgate._flush_telemetry()
            assert second == [] and _lockgate._metric_totals() == []
        assert first, "the first sink got the pairs' samples and spans"
    finally:
        _lockgate._set_telemetry_sink(None)
