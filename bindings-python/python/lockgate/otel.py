"""lockgate's metrics and spans through OpenTelemetry (``pip install opentelemetry-api``; the
application's SDK exports them)::

    import lockgate.otel

    lockgate.otel.instrument()  # the global meter and tracer providers, or pass your own

Every client then records the metrics of README "Telemetry" (the same names, attributes and
values as every lockgate binding: ``lockgate.lock.wait.duration``, ``lockgate.lock.held``, ...)
and one ``lockgate.acquire`` span per acquire that ended (its wait; a root span, not parented
to the caller's: the event may be handed on by another thread than the caller's, whose current
span would be the wrong parent). Nothing of OpenTelemetry is
imported until ``instrument()`` is called; ``uninstrument()`` stops it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _lockgate

__all__ = ["instrument", "uninstrument"]


def instrument(meter_provider: Any = None, tracer_provider: Any = None) -> None:
    """Records every client's lock metrics and acquire spans through OpenTelemetry, with the
    given providers (default: the global ones). Raises ImportError naming the package if
    ``opentelemetry-api`` is not installed."""
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.context import Context
        from opentelemetry.trace import Status, StatusCode
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("lockgate.otel needs OpenTelemetry: pip install opentelemetry-api (and an SDK to export)") from e

    version = getattr(_lockgate, "__version__", None)
    meter = (meter_provider or metrics.get_meter_provider()).get_meter("lockgate", version)
    tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("lockgate", version)
    # Histograms take each sample as it happens; counters and up-down counters are summed by
    # the core's driver and observed when the SDK collects (one call per collection, not one
    # per change: most of an acquire's updates are counts).
    from opentelemetry.metrics import CallbackOptions, Observation

    def observe(instrument: str) -> Callable[[CallbackOptions], List[Observation]]:
        def callback(_options: CallbackOptions) -> List[Observation]:
            return [Observation(total, attributes) for name, total, attributes in _lockgate._metric_totals() if name == instrument]

        return callback

    samples: Dict[str, Callable[..., None]] = {}
    for name, kind, unit, description in _lockgate._metric_instruments():
        if kind == "histogram":
            samples[name] = meter.create_histogram(name, unit=unit, description=description).record
        elif kind == "counter":
            meter.create_observable_counter(name, callbacks=[observe(name)], unit=unit, description=description)
        else:
            meter.create_observable_up_down_counter(name, callbacks=[observe(name)], unit=unit, description=description)

    def sink(updates: List[Tuple[str, float, Dict[str, str]]], spans: List[Tuple[str, int, int, Dict[str, str], Optional[str]]]) -> None:
        for name, value, attributes in updates:
            samples[name](value, attributes)
        for name, start_ns, end_ns, attributes, error in spans:
            s = tracer.start_span(name, context=Context(), start_time=start_ns, attributes=attributes)
            if error is not None:
                s.set_status(Status(StatusCode.ERROR, error))
            s.end(end_time=end_ns)

    _lockgate._set_telemetry_sink(sink)


def uninstrument() -> None:
    """Stops recording through OpenTelemetry."""
    _lockgate._set_telemetry_sink(None)
