package io.lockgate;

import io.lockgate.internal.ffi.NativeOptionValue;
import io.lockgate.internal.ffi.TelemetryEvent;
import io.lockgate.internal.ffi.TelemetrySink;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
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
    public void recordBatch(List<TelemetryEvent> events) {
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
            LoggingEventBuilder b = (e.getWarning() ? LOG.atWarn() : LOG.atDebug()).setMessage(e.getMessage())
                .addKeyValue("lockgate.event", e.getEvent())
                .addKeyValue("lockgate.backend", e.getBackend());
            if (e.getPrimitive() != null) {
                b = b.addKeyValue("lockgate.primitive", e.getPrimitive());
            }
            if (e.getLock() != null) {
                b = b.addKeyValue("lockgate.lock", e.getLock());
            }
            for (Map.Entry<String, NativeOptionValue> m : e.getMeasurements().entrySet()) {
                b = b.addKeyValue("lockgate." + m.getKey(), value(m.getValue()));
            }
            b.log();
        } catch (Throwable t) {
            // A failing appender never breaks a lock (and never unwinds into the native driver).
        }
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
