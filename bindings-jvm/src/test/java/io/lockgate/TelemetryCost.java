package io.lockgate;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.OutputStreamAppender;
import ch.qos.logback.core.read.ListAppender;
import java.io.OutputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.LoggerFactory;
import org.slf4j.event.KeyValuePair;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * Issue 27's measurement on the JVM: uncontended {@code acquire(5 s)} + {@code close()} with
 * telemetry off, fully on (logger {@code lockgate} at DEBUG into a logback appender that formats
 * every record with its key-value pairs, to a null stream), and the floor: telemetry off while
 * the application logs the very records one pair produces, through the same appender. On minus
 * floor is lockgate's own share. The three run in interleaved rounds, rotating which goes first.
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
        Map<String, List<Double>> rates = new HashMap<>();
        String[] modes = {"off", "on", "floor"};
        double recordsPerPair;
        try (LockgateClient client = LockgateClient.connect(url)) {
            DistributedLock lock = client.getLock("jvm-bench-telemetry-" + ProcessHandle.current().pid());
            List<ILoggingEvent> sample = capture(lockgate, lock, 200);
            recordsPerPair = sample.size() / 200.0;
            lockgate.setLevel(Level.WARN);
            for (int w = 0; w < 3; w++) {
                settle(lock); // warm-up: the JIT compiles the off path too before the first round
            }
            for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < modes.length; i++) {
                    String mode = modes[(r + i) % modes.length];
                    lockgate.setLevel(mode.equals("on") ? Level.DEBUG : Level.WARN);
                    settle(lock);
                    rates.computeIfAbsent(mode, k -> new ArrayList<>())
                        .add(round(lock, pairs, mode.equals("floor") ? app : null, sample, recordsPerPair));
                }
            }
        } finally {
            lockgate.setLevel(before);
            lockgate.detachAppender(sink);
            lockgate.setAdditive(true);
            app.detachAppender(sink);
            sink.stop();
        }
        return markdown(rates, pairs, rounds, recordsPerPair);
    }

    /** What {@code n} pairs log with telemetry on, once the relay has delivered it. */
    private static List<ILoggingEvent> capture(Logger lockgate, DistributedLock lock, int n) throws Exception {
        ListAppender<ILoggingEvent> list = new ListAppender<>();
        list.setContext(lockgate.getLoggerContext());
        list.start();
        lockgate.setLevel(Level.DEBUG);
        settle(lock);
        lockgate.addAppender(list);
        try {
            for (int i = 0; i < n; i++) {
                try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                    JvmBench.blackhole(lease.fencingToken().getAsLong());
                }
            }
            Thread.sleep(1500); // the relay thread delivers records after the calls return
            return new ArrayList<>(list.list);
        } finally {
            lockgate.detachAppender(list);
            list.stop();
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

    /** One round's pairs per second; with {@code app}, each pair also logs its share of {@code sample}. */
    private static double round(DistributedLock lock, int pairs, Logger app, List<ILoggingEvent> sample, double perPair)
        throws Exception {
        int next = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < pairs; i++) {
            try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                JvmBench.blackhole(lease.fencingToken().getAsLong());
            }
            if (app != null) {
                long due = (long) Math.floor((i + 1) * perPair) - (long) Math.floor(i * perPair);
                for (long k = 0; k < due; k++) {
                    log(app, sample.get(next));
                    next = (next + 1) % sample.size();
                }
            }
        }
        return pairs / ((System.nanoTime() - t0) / 1e9);
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

    private static String markdown(Map<String, List<Double>> rates, int pairs, int rounds, double recordsPerPair) {
        double offBest = 1e6 / best(rates.get("off"));
        double offMedian = 1e6 / median(rates.get("off"));
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "\nTelemetry off vs fully on (issue 27): uncontended `acquire(5 s)` + `close()`, "
            + "%d interleaved rounds of %d pairs per row (rotating which goes first; each after 1.2 s of pairs in its mode, "
            + "as the core asks the logger's level at most once a second). Fully on: SLF4J logger `lockgate` at DEBUG into a "
            + "logback appender formatting every record (`%s`) to a null stream, %.1f records per pair. Floor: telemetry off "
            + "while the application logs those same records (level, message, key-value pairs) through the same appender.\n\n",
            rounds, pairs, PATTERN.replace("%n", ""), recordsPerPair));
        sb.append("| row | pairs/s, best | pairs/s, median | per pair vs off (best / median) |\n|---|---:|---:|---:|\n");
        String[][] rows = {{"off", "telemetry off (WARN only, the default)"}, {"on", "telemetry fully on"},
            {"floor", "floor: the same records logged by the application, telemetry off"}};
        for (String[] row : rows) {
            List<Double> r = rates.get(row[0]);
            sb.append(String.format(Locale.ROOT, "| %s | %.0f | %.0f | %s |\n", row[1], best(r), median(r),
                row[0].equals("off") ? "—" : String.format(Locale.ROOT, "%+.1f %% / %+.1f %%",
                    (1e6 / best(r) / offBest - 1) * 100, (1e6 / median(r) / offMedian - 1) * 100)));
        }
        double ownBest = (1e6 / best(rates.get("on")) - 1e6 / best(rates.get("floor"))) / offBest * 100;
        double ownMedian = (1e6 / median(rates.get("on")) - 1e6 / median(rates.get("floor"))) / offMedian * 100;
        sb.append(String.format(Locale.ROOT, "\nlockgate's own share (fully on minus floor, per pair off): %+.1f %% (best), "
            + "%+.1f %% (median); target at most 3 %%.\n", ownBest, ownMedian));
        return sb.toString();
    }
}
