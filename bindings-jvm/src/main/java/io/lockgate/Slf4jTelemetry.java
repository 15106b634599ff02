package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeOptionValue;
import io.lockgate.internal.ffi.TelemetryEvent;
import io.lockgate.internal.ffi.TelemetryShape;
import io.lockgate.internal.ffi.TelemetrySink;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.function.IntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * Every client's telemetry (README "Telemetry": the core's one vocabulary of lock events) as
 * SLF4J records of logger {@code lockgate}: the core's text at WARN for losses, spells at risk
 * and expired sessions, at DEBUG for the rest, with key-value pairs {@code lockgate.event},
 * {@code lockgate.backend}, {@code lockgate.primitive}, {@code lockgate.lock} (only with the
 * client option {@code telemetryLockNames}) and the event's measurements ({@code
 * lockgate.wait_s}, {@code lockgate.queued}, {@code lockgate.held_s}, {@code lockgate.reason},
 * {@code lockgate.code}). Quiet until the application's SLF4J backend enables the logger.
 */
final class Slf4jTelemetry implements TelemetrySink {
    static final Slf4jTelemetry INSTANCE = new Slf4jTelemetry();
    private static final Logger LOG = LoggerFactory.getLogger("lockgate");
    /**
     * The metrics recorder while {@link LockgateMetrics} is bound to a registry, else null. A
     * plain {@code Consumer}, so this class never loads Micrometer's (optional) classes.
     */
    static volatile Consumer<TelemetryEvent> metrics;

    /** Each event shape by the number the core gave it, asked for once. */
    private static final Map<Integer, Shape> SHAPES = new ConcurrentHashMap<>();

    /** What every event of one shape has in common, with its measurements' keys as logged. */
    private record Shape(TelemetryShape def, String[] keys) {}

    private Slf4jTelemetry() {}

    @Override
    public boolean debugEnabled() {
        try {
            return LOG.isDebugEnabled();
        } catch (Throwable t) {
            return false; // called from the native driver: nothing may be thrown back into it
        }
    }

    @Override
    public void recordBatch(List<TelemetryEvent> events, long dropped) {
        if (dropped > 0) {
            try {
                LOG.atWarn()
                    .setMessage("telemetry events dropped: the JVM took none while the queue for it was full")
                    .addKeyValue("lockgate.dropped", dropped)
                    .log();
            } catch (Throwable t) {
                // A failing appender never breaks a lock (and never unwinds into the native driver).
            }
        }
        for (TelemetryEvent e : events) {
            record(e);
        }
    }

    private static void record(TelemetryEvent e) {
        Consumer<TelemetryEvent> recorder = metrics;
        if (recorder != null) {
            try {
                recorder.accept(e);
            } catch (Throwable t) {
                // A failing registry never breaks a lock (nor unwinds into the native driver).
            }
        }
        try {
            Shape shape = shape(e.getShape());
            if (shape == null) {
                return; // not a number the core gave: nothing to log it as
            }
            TelemetryShape d = shape.def();
            LoggingEventBuilder b = (d.getWarning() ? LOG.atWarn() : LOG.atDebug()).setMessage(d.getMessage())
                .addKeyValue("lockgate.event", d.getEvent())
                .addKeyValue("lockgate.backend", d.getBackend());
            if (d.getPrimitive() != null) {
                b = b.addKeyValue("lockgate.primitive", d.getPrimitive());
            }
            if (e.getLock() != null) {
                b = b.addKeyValue("lockgate.lock", e.getLock());
            }
            List<NativeOptionValue> values = e.getValues();
            for (int i = 0; i < values.size() && i < shape.keys().length; i++) {
                b = b.addKeyValue(shape.keys()[i], value(values.get(i)));
            }
            b.log();
        } catch (Throwable t) {
            // A failing appender never breaks a lock (and never unwinds into the native driver).
        }
    }

    /** Shape {@code id}, asked of the core the first time it is seen. */
    private static Shape shape(int id) {
        return numbered(SHAPES, id, k -> {
            TelemetryShape def = Bridge.telemetryShape(k);
            return def == null ? null : new Shape(def, def.getKeys().stream().map(key -> "lockgate." + key).toArray(String[]::new));
        });
    }

    /**
     * What the core's number {@code id} stands for, from {@code known} or else made by {@code ask}
     * (a crossing into the core) and kept: events and metric updates name what is fixed about them
     * by number. Null when the core knows no such number.
     */
    static <T> T numbered(Map<Integer, T> known, int id, IntFunction<T> ask) {
        T kept = known.get(id);
        if (kept != null) {
            return kept;
        }
        T made = ask.apply(id);
        if (made == null) {
            return null;
        }
        T raced = known.putIfAbsent(id, made);
        return raced != null ? raced : made;
    }

    private static Object value(NativeOptionValue v) {
        if (v instanceof NativeOptionValue.Real r) {
            return r.getV();
        }
        if (v instanceof NativeOptionValue.Flag f) {
            return f.getV();
        }
        if (v instanceof NativeOptionValue.Text t) {
            return t.getV();
        }
        if (v instanceof NativeOptionValue.Whole w) {
            return w.getV();
        }
        return String.valueOf(v);
    }
}
