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
    private static final com.sun.management.OperatingSystemMXBean CPU =
        (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();
    private static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();
    /** Pairs each row runs before it is measured. */
    private static final int WARM_UP = 300;
    /** Longer than the relay's linger (5 ms) and one batch's crossing. */
    private static final long RELAY_DRAINED_MS = 30;

    private TelemetryCost() {}

    /**
     * Runs {@link #measure} in a JVM of its own on CPU 0 with the server's process on the last CPU
     * ({@code taskset}, Linux), or here, unpinned, where that cannot be done (one CPU, no
     * {@code taskset}, the child failing). Unpinned on a shared 2-core machine, the threads of the
     * caller, the driver, the relay and the server move between the cores from round to round, and
     * the rate of the same row swings by half between rounds (rounds' own shares from −100 % to
     * +70 %): that measures the placement, not a few percent of telemetry. Pinned, the caller's
     * whole process shares one core, so whatever the relay thread costs is taken from the caller's
     * pairs, and the server keeps the other.
     */
    static String measurePinned(String url, long serverPid, int pairs, int rounds) throws Exception {
        int cpus = Runtime.getRuntime().availableProcessors();
        String java = ProcessHandle.current().info().command().orElse(null);
        if (cpus >= 2 && java != null && run(List.of("taskset", "-pc", String.valueOf(cpus - 1), String.valueOf(serverPid))) != null) {
            String placement = "this JVM alone on CPU 0 and the redis-server on CPU " + (cpus - 1) + " (`taskset`)";
            String md = run(List.of("taskset", "-c", "0", java, "-cp", System.getProperty("java.class.path"), TelemetryCost.class.getName(), url,
                String.valueOf(pairs), String.valueOf(rounds), placement));
            run(List.of("taskset", "-pc", "0-" + (cpus - 1), String.valueOf(serverPid)));
            if (md != null) {
                return md;
            }
        }
        return measure(url, pairs, rounds, "unpinned: `taskset` or a second CPU was not available");
    }

    /** What {@code cmd} printed, or null if it could not run or failed. */
    private static String run(List<String> cmd) {
        try {
            Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            return p.waitFor() == 0 ? out : null;
        } catch (java.io.IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /** {@link #measurePinned}'s child: url, pairs, rounds, placement; prints the markdown. */
    public static void main(String[] args) throws Exception {
        System.out.print(measure(args[0], Integer.parseInt(args[1]), Integer.parseInt(args[2]), args[3]));
        System.out.flush();
        System.exit(0);
    }

    /**
     * A markdown paragraph and table of the three, {@code rounds} rounds of {@code pairs} pairs each;
     * {@code placement} says where the process and the server ran.
     */
    static String measure(String url, int pairs, int rounds, String placement) throws Exception {
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
        Map<String, List<Double>> cpu = new HashMap<>();
        Map<String, List<Double>> work = new HashMap<>();
        String[] modes = {"off", "on", "floor"};
        String name = "jvm-bench-telemetry-" + ProcessHandle.current().pid();
        Sample sample;
        try {
            sample = capture(lockgate, url, name, 200);
            for (int w = 0; w < 3; w++) {
                for (String mode : modes) { // warm-up: the JIT compiles every row's path before the first round
                    row(url, name, lockgate, mode, WARM_UP, null, sample);
                }
            }
            for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < modes.length; i++) {
                    String mode = modes[(r + i) % modes.length];
                    double[] measured = row(url, name, lockgate, mode, pairs, mode.equals("floor") ? app : null, sample);
                    rates.computeIfAbsent(mode, k -> new ArrayList<>()).add(measured[0]);
                    cpu.computeIfAbsent(mode, k -> new ArrayList<>()).add(measured[1]);
                    work.computeIfAbsent(mode, k -> new ArrayList<>()).add(measured[2]);
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
        return markdown(rates, cpu, work, pairs, rounds, sample, placement);
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

    /**
     * One row of a round: {@code mode} set, then a client connected (a new client asks the logger's
     * level at once, where a connected one asks at most once a second), {@link #WARM_UP} pairs,
     * then the round's.
     */
    private static double[] row(String url, String name, Logger lockgate, String mode, int pairs, Logger app, Sample sample)
            throws Exception {
        mode(lockgate, mode.equals("on"));
        try (LockgateClient client = LockgateClient.connect(url)) {
            DistributedLock lock = client.getLock(name);
            pairs(lock, WARM_UP);
            return round(lock, pairs, app, sample);
        }
    }

    /** What {@code n} pairs log and record with telemetry on, once the relay has delivered it. */
    private static Sample capture(Logger lockgate, String url, String name, int n) throws Exception {
        ListAppender<ILoggingEvent> list = new ListAppender<>();
        list.setContext(lockgate.getLoggerContext());
        list.start();
        mode(lockgate, true);
        List<TelemetryEvent> events = new CopyOnWriteArrayList<>();
        Slf4jTelemetry.metrics = e -> {
            events.add(e);
            LockgateMetrics.record(e);
        };
        lockgate.addAppender(list);
        try (LockgateClient client = LockgateClient.connect(url)) {
            DistributedLock lock = client.getLock(name);
            pairs(lock, WARM_UP);
            // The relay thread hands records on after the calls return: what the warm-up pairs
            // (and this JVM's earlier clients) raised is let through before the sample starts.
            quiet(list);
            list.list.clear();
            events.clear();
            pairs(lock, n);
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

    /** {@code n} pairs, unmeasured. */
    private static void pairs(DistributedLock lock, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                JvmBench.blackhole(lease.fencingToken().getAsLong());
            }
        }
    }

    /**
     * One round: its pairs per second; this process's CPU time per pair (µs, every thread: the
     * caller's, the driver's, the relay's, the collector's); and the CPU time per pair (µs) of the
     * telemetry's own work: the relay thread's (lockgate's share and the logging and recording it
     * does) or, for the floor, the application's logging and recording on the caller's thread. With
     * {@code app}, each pair also logs its share of the sample's records and records its share of
     * its metric updates (the floor).
     */
    private static double[] round(DistributedLock lock, int pairs, Logger app, Sample sample) throws Exception {
        int nextRecord = 0;
        int nextEvent = 0;
        double recordsPerPair = sample.recordsPerPair();
        double eventsPerPair = sample.eventsPerPair();
        long floorCpu = 0;
        long relay0 = relayCpu();
        long cpu0 = CPU.getProcessCpuTime();
        long t0 = System.nanoTime();
        for (int i = 0; i < pairs; i++) {
            try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                JvmBench.blackhole(lease.fencingToken().getAsLong());
            }
            if (app != null) {
                long c0 = THREADS.getCurrentThreadCpuTime();
                for (long k = due(i, recordsPerPair); k > 0; k--) {
                    log(app, sample.records().get(nextRecord));
                    nextRecord = (nextRecord + 1) % sample.records().size();
                }
                for (long k = due(i, eventsPerPair); k > 0; k--) {
                    LockgateMetrics.record(sample.events().get(nextEvent));
                    nextEvent = (nextEvent + 1) % sample.events().size();
                }
                floorCpu += THREADS.getCurrentThreadCpuTime() - c0;
            }
        }
        double rate = pairs / ((System.nanoTime() - t0) / 1e9);
        // The relay hands the last events on up to 5 ms after they were raised: its CPU time is
        // this round's. An idle wait costs the process next to none.
        Thread.sleep(RELAY_DRAINED_MS);
        long work = app != null ? floorCpu : relayCpu() - relay0;
        return new double[] {rate, (CPU.getProcessCpuTime() - cpu0) / 1e3 / pairs, work / 1e3 / pairs};
    }

    /** CPU time (ns) the telemetry relay's thread has used (Bridge names it `lockgate-telemetry`). */
    private static long relayCpu() {
        long sum = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("lockgate-telemetry")) {
                sum += Math.max(0, THREADS.getThreadCpuTime(t.getId()));
            }
        }
        return sum;
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

    private static String markdown(Map<String, List<Double>> rates, Map<String, List<Double>> cpu, Map<String, List<Double>> work, int pairs, int rounds, Sample sample,
            String placement) {
        double offBest = 1e6 / best(rates.get("off"));
        double offMedian = 1e6 / median(rates.get("off"));
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "\nTelemetry off vs fully on (issue 27): uncontended `acquire(5 s)` + `close()`, "
            + "%d interleaved rounds of %d pairs per row (rotating which goes first; each row on a client connected after "
            + "its mode was set, as a client asks the logger's level when it connects and at most once a second after, "
            + "and after %d pairs of warm-up; %s). Fully on: SLF4J logger `lockgate` at DEBUG into a "
            + "logback appender formatting every record (`%s`) to a null stream, %.1f records per pair, and every metric "
            + "recorded into a Micrometer `SimpleMeterRegistry` through `LockgateMetrics`, %.1f updates per pair. Floor: "
            + "telemetry off while the application logs those same records (level, message, key-value pairs) through the same "
            + "appender and records those same updates into the same registry.\n\n",
            rounds, pairs, WARM_UP, placement, PATTERN.replace("%n", ""), sample.recordsPerPair(), sample.updatesPerPair()));
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
        // CPU time per pair counts the work wherever it runs (the relay thread beside the caller,
        // the floor's logging on the caller's thread), so it is free of how the two cores were shared.
        List<Double> cpuOwn = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            cpuOwn.add((cpu.get("on").get(r) - cpu.get("floor").get(r)) / cpu.get("off").get(r) * 100);
        }
        cpuOwn.sort(Double::compare);
        sb.append(String.format(Locale.ROOT, "\nThis process's CPU time per pair (every thread, the medians of the rounds): off %.1f µs, "
            + "fully on %.1f µs, floor %.1f µs; lockgate's own share of it (on minus floor, per pair off, per round) %+.1f %% "
            + "(range %+.1f to %+.1f).\n", median(cpu.get("off")), median(cpu.get("on")), median(cpu.get("floor")), median(cpuOwn),
            cpuOwn.get(0), cpuOwn.get(rounds - 1)));
        // The telemetry's own work, each on the one thread that does it (no spinning or waiting
        // in it): what the relay thread spends against what the application's logging and
        // recording spend on the caller's thread.
        double relay = median(work.get("on"));
        double floor = median(work.get("floor"));
        sb.append(String.format(Locale.ROOT, "\nThe telemetry's own work, CPU time per pair on the thread that does it (the medians of the "
            + "rounds): the relay thread (`lockgate-telemetry`: converting, crossing into Java, then the same logging and "
            + "recording) %.1f µs; the floor's logging and recording on the caller's thread %.1f µs; lockgate's share %+.1f µs, "
            + "%+.1f %% of an off pair (%.1f µs at the off row's median rate).\n", relay, floor, relay - floor,
            (relay - floor) / offMedian * 100, offMedian));
        return sb.toString();
    }
}
