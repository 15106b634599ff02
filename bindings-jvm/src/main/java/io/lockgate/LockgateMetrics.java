package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.MetricUpdate;
import io.lockgate.internal.ffi.TelemetryEvent;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
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
    /** The current value of each up-down count, by name and tags (one for every registry). */
    private static final Map<String, AtomicLong> GAUGES = new ConcurrentHashMap<>();

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
     * Stops recording into {@code registry} (and, with no registry left, stops recording).
     *
     * @param registry a registry this binder was bound to ({@link #bindTo(MeterRegistry)})
     */
    public static void unbind(MeterRegistry registry) {
        REGISTRIES.remove(registry);
        if (REGISTRIES.isEmpty()) {
            Bridge.metricsWanted(false);
            Slf4jTelemetry.metrics = null;
        }
    }

    private static void record(TelemetryEvent e) {
        for (MetricUpdate u : e.getMetrics()) {
            Tags tags = Tags.of(u.getAttributes().entrySet().stream().map(a -> Tag.of(a.getKey(), a.getValue())).toList());
            switch (u.getKind()) {
                case "histogram" -> {
                    Duration d = Duration.ofNanos(Math.round(u.getValue() * 1e9));
                    for (MeterRegistry r : REGISTRIES) {
                        Timer.builder(u.getInstrument()).description(u.getDescription()).tags(tags).register(r).record(d);
                    }
                }
                case "counter" -> {
                    for (MeterRegistry r : REGISTRIES) {
                        Counter.builder(u.getInstrument()).description(u.getDescription()).tags(tags).register(r).increment(u.getValue());
                    }
                }
                default -> {
                    String key = u.getInstrument() + tags;
                    AtomicLong now = GAUGES.computeIfAbsent(key, k -> new AtomicLong());
                    for (MeterRegistry r : REGISTRIES) {
                        Gauge.builder(u.getInstrument(), now, AtomicLong::get).description(u.getDescription()).tags(tags).strongReference(true).register(r);
                    }
                    now.addAndGet(Math.round(u.getValue()));
                }
            }
        }
    }
}
