package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.MetricSeries;
import io.lockgate.internal.ffi.MetricUpdate;
import io.lockgate.internal.ffi.TelemetryEvent;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * lockgate's metrics in Micrometer (README "Telemetry": the same instruments, attributes and
 * values as every lockgate binding, defined once in the core), for every client of the process:
 * {@code new LockgateMetrics().bindTo(registry)} — or declare it as a Spring bean, which binds it
 * to the application's registry. Wait and hold durations are {@link Timer}s
 * ({@code lockgate.lock.wait.duration}, {@code lockgate.lock.hold.duration}), counts are
 * {@link Counter}s ({@code lockgate.lock.acquisitions}, {@code lockgate.lock.losses}, ...), and
 * what is held or waiting now are {@link Gauge}s ({@code lockgate.lock.held},
 * {@code lockgate.lock.waiting}); tags {@code lockgate.backend}, {@code lockgate.primitive},
 * {@code lockgate.outcome}, ... and, with the client option {@code telemetryLockNames},
 * {@code lockgate.lock.name}. Micrometer is an optional dependency: nothing of it is loaded
 * unless this class is used.
 */
public final class LockgateMetrics implements MeterBinder {
    /** The registries bound, each with its meters. */
    private static final List<Bound> REGISTRIES = new CopyOnWriteArrayList<>();
    /** Each series by the number the core gave it, asked for once. */
    private static final Map<Integer, Series> SERIES = new ConcurrentHashMap<>();

    /**
     * One instrument with one set of attributes; {@code now} is an up-down count's current value
     * (one for every registry), read by its gauges.
     */
    private record Series(MetricSeries def, Tags tags, AtomicLong now) {}

    /** A bound registry and its meters by series number, registered on first use. */
    private record Bound(MeterRegistry registry, Map<Integer, Meter> meters) {}

    /** A binder; every instance records the same process-wide metrics. */
    public LockgateMetrics() {}

    @Override
    public void bindTo(MeterRegistry registry) {
        if (REGISTRIES.stream().noneMatch(b -> b.registry() == registry)) {
            REGISTRIES.add(new Bound(registry, new ConcurrentHashMap<>()));
        }
        Slf4jTelemetry.metrics = LockgateMetrics::record;
        Bridge.metricsWanted(true);
    }

    /**
     * Stops recording into {@code registry} (and, with no registry left, stops recording). Its
     * meters are registered once each and then kept: an application that removes one of them from
     * the registry unbinds and binds again to have it registered anew.
     *
     * @param registry a registry this binder was bound to ({@link #bindTo(MeterRegistry)})
     */
    public static void unbind(MeterRegistry registry) {
        REGISTRIES.removeIf(b -> b.registry() == registry);
        if (REGISTRIES.isEmpty()) {
            Bridge.metricsWanted(false);
            Slf4jTelemetry.metrics = null;
        }
    }

    /** Records {@code e}'s metric updates into every bound registry (package-private: TelemetryCost's floor records the same). */
    static void record(TelemetryEvent e) {
        for (MetricUpdate u : e.getMetrics()) {
            Series series = series(u.getSeries());
            if (series == null) {
                continue; // not a number the core gave: nothing to record it as
            }
            switch (series.def().getKind()) {
                case "histogram" -> {
                    Duration d = Duration.ofNanos(Math.round(u.getValue() * 1e9));
                    for (Bound b : REGISTRIES) {
                        ((Timer) meter(b, u.getSeries(), series)).record(d);
                    }
                }
                case "counter" -> {
                    for (Bound b : REGISTRIES) {
                        ((Counter) meter(b, u.getSeries(), series)).increment(u.getValue());
                    }
                }
                default -> {
                    for (Bound b : REGISTRIES) {
                        meter(b, u.getSeries(), series);
                    }
                    series.now().addAndGet(Math.round(u.getValue()));
                }
            }
        }
    }

    /** Series {@code id}, asked of the core the first time it is seen. */
    private static Series series(int id) {
        return Slf4jTelemetry.numbered(SERIES, id, k -> {
            MetricSeries def = Bridge.metricSeries(k);
            return def == null ? null
                : new Series(def, Tags.of(def.getAttributes().entrySet().stream().map(a -> Tag.of(a.getKey(), a.getValue())).toList()),
                    new AtomicLong());
        });
    }

    /**
     * Series {@code id}'s meter in {@code b}, registered on its first update. Kept: a builder and a
     * registry lookup per update cost more than the update itself, and a gauge registered again
     * makes Micrometer warn.
     */
    private static Meter meter(Bound b, int id, Series s) {
        Meter known = b.meters().get(id);
        if (known != null) {
            return known;
        }
        return b.meters().computeIfAbsent(id, k -> {
            MetricSeries d = s.def();
            return switch (d.getKind()) {
                case "histogram" -> Timer.builder(d.getInstrument()).description(d.getDescription()).tags(s.tags()).register(b.registry());
                case "counter" -> Counter.builder(d.getInstrument()).description(d.getDescription()).tags(s.tags()).register(b.registry());
                default -> Gauge.builder(d.getInstrument(), s.now(), AtomicLong::get).description(d.getDescription()).tags(s.tags())
                    .strongReference(true).register(b.registry());
            };
        });
    }
}
