package io.lockgate;

import io.lockgate.internal.Bridge;
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
    private static final List<MeterRegistry> REGISTRIES = new CopyOnWriteArrayList<>();
    /** The current value of each up-down count, by instrument and attributes (one for every registry). */
    private static final Map<Series, AtomicLong> GAUGES = new ConcurrentHashMap<>();
    /** Each registry's meters, by instrument and attributes, registered on first use. */
    private static final Map<Registered, Meter> METERS = new ConcurrentHashMap<>();

    /** One instrument's series: its name and attributes. */
    private record Series(String instrument, Map<String, String> attributes) {}

    /** A series in one registry (registries compare by identity). */
    private record Registered(MeterRegistry registry, Series series) {}

    /** A binder; every instance records the same process-wide metrics. */
    public LockgateMetrics() {}

    @Override
    public void bindTo(MeterRegistry registry) {
        if (!REGISTRIES.contains(registry)) {
            REGISTRIES.add(registry);
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
        REGISTRIES.remove(registry);
        METERS.keySet().removeIf(k -> k.registry() == registry);
        if (REGISTRIES.isEmpty()) {
            Bridge.metricsWanted(false);
            Slf4jTelemetry.metrics = null;
        }
    }

    /** Records {@code e}'s metric updates into every bound registry (package-private: TelemetryCost's floor records the same). */
    static void record(TelemetryEvent e) {
        for (MetricUpdate u : e.getMetrics()) {
            Series series = new Series(u.getInstrument(), u.getAttributes());
            switch (u.getKind()) {
                case "histogram" -> {
                    Duration d = Duration.ofNanos(Math.round(u.getValue() * 1e9));
                    for (MeterRegistry r : REGISTRIES) {
                        ((Timer) meter(r, series, u, null)).record(d);
                    }
                }
                case "counter" -> {
                    for (MeterRegistry r : REGISTRIES) {
                        ((Counter) meter(r, series, u, null)).increment(u.getValue());
                    }
                }
                default -> {
                    AtomicLong now = GAUGES.computeIfAbsent(series, k -> new AtomicLong());
                    for (MeterRegistry r : REGISTRIES) {
                        meter(r, series, u, now);
                    }
                    now.addAndGet(Math.round(u.getValue()));
                }
            }
        }
    }

    /**
     * The meter of {@code series} (the instrument and attributes of {@code u}) in {@code r}, registered on its first
     * update ({@code gauge}: a gauge's value, read by Micrometer). Kept: a builder and a registry
     * lookup per update cost more than the update itself, and a gauge registered again makes
     * Micrometer warn.
     */
    private static Meter meter(MeterRegistry r, Series series, MetricUpdate u, AtomicLong gauge) {
        return METERS.computeIfAbsent(new Registered(r, series), k -> {
            Tags tags = Tags.of(u.getAttributes().entrySet().stream().map(a -> Tag.of(a.getKey(), a.getValue())).toList());
            return switch (u.getKind()) {
                case "histogram" -> Timer.builder(u.getInstrument()).description(u.getDescription()).tags(tags).register(r);
                case "counter" -> Counter.builder(u.getInstrument()).description(u.getDescription()).tags(tags).register(r);
                default -> Gauge.builder(u.getInstrument(), gauge, AtomicLong::get).description(u.getDescription()).tags(tags)
                    .strongReference(true).register(r);
            };
        });
    }
}
