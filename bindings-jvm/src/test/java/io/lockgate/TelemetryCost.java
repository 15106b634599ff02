package io.lockgate;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.OutputStreamAppender;
import ch.qos.logback.core.read.ListAppender;
import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.TelemetryEvent;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.OutputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.LoggerFactory;
import org.slf4j.event.KeyValuePair;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * Issue 27's measurement on the JVM: uncontended {@code acquire(5 s)} + {@code close()} with
 * telemetry off, fully on (logger {@code lockgate} at DEBUG into a logback appender that formats
 * every record with its key-value pairs, to a null stream, and every metric recorded into a
 * Micrometer {@code SimpleMeterRegistry} through {@link LockgateMetrics}), and the floor:
 * telemetry off while the application logs the very records one pair produces, through the same
 * appender, and records the very metric updates into the same registry. On minus floor is
 * lockgate's own share. The three run in interleaved rounds, rotating which goes first.
 */
final class TelemetryCost {
    private static final String PATTERN = "%d %-5level %logger - %msg %kvp%n";

    private TelemetryCost() {}

    /** A markdown paragraph and table of the three, {@code rounds} rounds of {@code pairs} pairs each. */
    static String measure(String url, int pairs, int rounds) throws Exception {
        Logger lockgate = (Logger) LoggerFactory.getLogger("lockgate");
        Logger app = (Logger) LoggerFactory.getLogger("bench.floor");
        LoggerContext context = lockgate.getLoggerContext();
        OutputStreamAppender<ILoggingEvent> sink = nullAppender(context);
        Level before = lockgate.getLevel();
        lockgate.setAdditive(false);
        lockgate.addAppender(sink);
        app.setAdditive(false);
        app.addAppender(sink);
        app.setLevel(Level.DEBUG);
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new LockgateMetrics().bindTo(registry);
        Map<String, List<Double>> rates = new HashMap<>();
        String[] modes = {"off", "on", "floor"};
        Sample sample;
        try (LockgateClient client = LockgateClient.connect(url)) {
            DistributedLock lock = client.getLock("jvm-bench-telemetry-" + ProcessHandle.current().pid());
            sample = capture(lockgate, lock, 200);
            mode(lockgate, false);
            for (int w = 0; w < 3; w++) {
                settle(lock); // warm-up: the JIT compiles the off path too before the first round
            }
            for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < modes.length; i++) {
                    String mode = modes[(r + i) % modes.length];
                    mode(lockgate, mode.equals("on"));
                    settle(lock);
                    rates.computeIfAbsent(mode, k -> new ArrayList<>())
                        .add(round(lock, pairs, mode.equals("floor") ? app : null, sample));
                }
            }
        } finally {
            LockgateMetrics.unbind(registry);
            lockgate.setLevel(before);
            lockgate.detachAppender(sink);
            lockgate.setAdditive(true);
            app.detachAppender(sink);
            sink.stop();
        }
        return markdown(rates, pairs, rounds, sample);
    }

    /** Telemetry fully on (DEBUG records, metrics recorded) or off (WARN only, no metrics). */
    private static void mode(Logger lockgate, boolean on) {
        lockgate.setLevel(on ? Level.DEBUG : Level.WARN);
        Slf4jTelemetry.metrics = on ? LockgateMetrics::record : null;
        Bridge.metricsWanted(on);
    }

    /** What one pair produces with telemetry on: its records and metric-carrying events, per pair. */
    private record Sample(List<ILoggingEvent> records, List<TelemetryEvent> events, int pairs) {
        double recordsPerPair() {
            return records.size() / (double) pairs;
        }

        double eventsPerPair() {
            return events.size() / (double) pairs;
        }

        double updatesPerPair() {
            return events.stream().mapToInt(e -> e.getMetrics().size()).sum() / (double) pairs;
        }
    }

    /** What {@code n} pairs log and record with telemetry on, once the relay has delivered it. */
    private static Sample capture(Logger lockgate, DistributedLock lock, int n) throws Exception {
        ListAppender<ILoggingEvent> list = new ListAppender<>();
        list.setContext(lockgate.getLoggerContext());
        list.start();
        mode(lockgate, true);
        settle(lock);
        List<TelemetryEvent> events = new CopyOnWriteArrayList<>();
        Slf4jTelemetry.metrics = e -> {
            events.add(e);
            LockgateMetrics.record(e);
        };
        lockgate.addAppender(list);
        try {
            // The relay thread hands records on after the calls return: what the settling pairs
            // (and this JVM's earlier clients) raised is let through before the sample starts.
            quiet(list);
            list.list.clear();
            events.clear();
            for (int i = 0; i < n; i++) {
                try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                    JvmBench.blackhole(lease.fencingToken().getAsLong());
                }
            }
            quiet(list);
            return new Sample(new ArrayList<>(list.list), new ArrayList<>(events), n);
        } finally {
            lockgate.detachAppender(list);
            list.stop();
            mode(lockgate, true);
        }
    }

    /** Returns once {@code list} has taken no record for 300 ms (the relay is done). */
    private static void quiet(ListAppender<ILoggingEvent> list) throws InterruptedException {
        int seen = -1;
        while (seen != list.list.size()) {
            seen = list.list.size();
            Thread.sleep(300);
        }
    }

    /** Pairs for 1.2 s: the core asks the logger's level at most once a second. */
    private static void settle(DistributedLock lock) throws Exception {
        long until = System.nanoTime() + 1_200_000_000L;
        while (System.nanoTime() < until) {
            try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                JvmBench.blackhole(lease.fencingToken().getAsLong());
            }
        }
    }

    /**
     * One round's pairs per second; with {@code app}, each pair also logs its share of the
     * sample's records and records its share of its metric updates (the floor).
     */
    private static double round(DistributedLock lock, int pairs, Logger app, Sample sample) throws Exception {
        int nextRecord = 0;
        int nextEvent = 0;
        double recordsPerPair = sample.recordsPerPair();
        double eventsPerPair = sample.eventsPerPair();
        long t0 = System.nanoTime();
        for (int i = 0; i < pairs; i++) {
            try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                JvmBench.blackhole(lease.fencingToken().getAsLong());
            }
            if (app != null) {
                for (long k = due(i, recordsPerPair); k > 0; k--) {
                    log(app, sample.records().get(nextRecord));
                    nextRecord = (nextRecord + 1) % sample.records().size();
                }
                for (long k = due(i, eventsPerPair); k > 0; k--) {
                    LockgateMetrics.record(sample.events().get(nextEvent));
                    nextEvent = (nextEvent + 1) % sample.events().size();
                }
            }
        }
        return pairs / ((System.nanoTime() - t0) / 1e9);
    }

    /** How many of something produced {@code perPair} times a pair fall to pair {@code i}. */
    private static long due(int i, double perPair) {
        return (long) Math.floor((i + 1) * perPair) - (long) Math.floor(i * perPair);
    }

    /** The application logging {@code e} itself: its level, message and key-value pairs. */
    private static void log(Logger app, ILoggingEvent e) {
        LoggingEventBuilder b = app.atLevel(org.slf4j.event.Level.valueOf(e.getLevel().toString())).setMessage(e.getMessage());
        if (e.getKeyValuePairs() != null) {
            for (KeyValuePair kv : e.getKeyValuePairs()) {
                b = b.addKeyValue(kv.key, kv.value);
            }
        }
        b.log();
    }

    private static OutputStreamAppender<ILoggingEvent> nullAppender(LoggerContext context) {
        PatternLayoutEncoder encoder = new PatternLayoutEncoder();
        encoder.setContext(context);
        encoder.setPattern(PATTERN);
        encoder.start();
        OutputStreamAppender<ILoggingEvent> appender = new OutputStreamAppender<>();
        appender.setContext(context);
        appender.setEncoder(encoder);
        appender.setOutputStream(OutputStream.nullOutputStream());
        appender.start();
        return appender;
    }

    private static double median(List<Double> xs) {
        List<Double> s = new ArrayList<>(xs);
        s.sort(Double::compare);
        int n = s.size();
        return n % 2 == 1 ? s.get(n / 2) : (s.get(n / 2 - 1) + s.get(n / 2)) / 2;
    }

    private static double best(List<Double> xs) {
        return xs.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
    }

    private static String markdown(Map<String, List<Double>> rates, int pairs, int rounds, Sample sample) {
        double offBest = 1e6 / best(rates.get("off"));
        double offMedian = 1e6 / median(rates.get("off"));
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "\nTelemetry off vs fully on (issue 27): uncontended `acquire(5 s)` + `close()`, "
            + "%d interleaved rounds of %d pairs per row (rotating which goes first; each after 1.2 s of pairs in its mode, "
            + "as the core asks the logger's level at most once a second). Fully on: SLF4J logger `lockgate` at DEBUG into a "
            + "logback appender formatting every record (`%s`) to a null stream, %.1f records per pair, and every metric "
            + "recorded into a Micrometer `SimpleMeterRegistry` through `LockgateMetrics`, %.1f updates per pair. Floor: "
            + "telemetry off while the application logs those same records (level, message, key-value pairs) through the same "
            + "appender and records those same updates into the same registry.\n\n",
            rounds, pairs, PATTERN.replace("%n", ""), sample.recordsPerPair(), sample.updatesPerPair()));
        sb.append("| row | pairs/s, best | pairs/s, median | per pair vs off (best / median) |\n|---|---:|---:|---:|\n");
        String[][] rows = {{"off", "telemetry off (WARN only, the default)"}, {"on", "telemetry fully on"},
            {"floor", "floor: the same records logged and updates recorded by the application, telemetry off"}};
        for (String[] row : rows) {
            List<Double> r = rates.get(row[0]);
            sb.append(String.format(Locale.ROOT, "| %s | %.0f | %.0f | %s |\n", row[1], best(r), median(r),
                row[0].equals("off") ? "—" : String.format(Locale.ROOT, "%+.1f %% / %+.1f %%",
                    (1e6 / best(r) / offBest - 1) * 100, (1e6 / median(r) / offMedian - 1) * 100)));
        }
        double ownBest = (1e6 / best(rates.get("on")) - 1e6 / best(rates.get("floor"))) / offBest * 100;
        double ownMedian = (1e6 / median(rates.get("on")) - 1e6 / median(rates.get("floor"))) / offMedian * 100;
        // Per round: its three rows ran seconds apart, so a round's own share is free of the drift
        // between rounds that best against best and median against median carry.
        List<Double> perRound = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            double off = rates.get("off").get(r);
            perRound.add((off / rates.get("on").get(r) - off / rates.get("floor").get(r)) * 100);
        }
        perRound.sort(Double::compare);
        sb.append(String.format(Locale.ROOT, "\nlockgate's own share (fully on minus floor, per pair off): %+.1f %% of a pair, "
            + "the median of the rounds' own shares (range %+.1f to %+.1f); best against best %+.1f %%, median against median "
            + "%+.1f %%. Target: at most 3 %%.\n", median(perRound), perRound.get(0), perRound.get(rounds - 1), ownBest, ownMedian));
        return sb.toString();
    }
}
