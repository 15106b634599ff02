package io.lockgate;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * lockgate's Java binding against a JVM peer library on the same real server, in one run (issue
 * 15's ZooKeeper comparison, {@link ZkBench}, and issue 30's Redis one, {@link RedissonBench}):
 * uncontended acquire+release pairs per second (interleaved rounds, best and median), and
 * contended acquisitions per second with each worker count holding ~1 ms and re-acquiring at
 * once: handoff p50/p99, Jain's fairness index over the workers' acquisitions, the share of
 * acquisitions re-taken by the releaser, and the server's own count of requests per acquisition.
 * One client per worker for every library.
 */
final class PeerBench {
    static final Duration WAIT = Duration.ofSeconds(60);
    private static final long HOLD_NANOS = 1_000_000L;

    private PeerBench() {}

    /** One library's lock as the benchmark drives it: its own client per instance. */
    interface Locker extends AutoCloseable {
        void lock() throws Exception;

        void unlock() throws Exception;

        @Override
        void close();
    }

    /** Opens a {@link Locker} on the lock named {@code name}. */
    interface Factory {
        Locker open(String name) throws Exception;
    }

    /** lockgate: {@code acquire(timeout)} returns the lease, {@code close()} releases it. */
    static final class LockgateLocker implements Locker {
        private final LockgateClient client;
        private final DistributedLock lock;
        private Lease lease;

        LockgateLocker(String url, String name) {
            client = LockgateClient.connect(url);
            lock = client.getLock(name);
        }

        @Override
        public void lock() throws Exception {
            lease = lock.acquire(WAIT);
        }

        @Override
        public void unlock() {
            lease.close();
        }

        @Override
        public void close() {
            client.close();
        }
    }

    /**
     * What one comparison is: its section heading and the paragraphs that say what ran, how its
     * server counts requests ({@code counter}: a running total whose every reading is itself
     * counted once), the names its locks get ({@code prefix} + a suffix), the worker counts of
     * its contended rows, and a closing paragraph.
     */
    record Spec(String heading, String setup, String requests, String requestsHow, LongSupplier counter, String prefix,
                int[] workers, String remark) {}

    /** Contended figures of one library at one worker count. */
    record Contended(double perSecond, double p50us, double p99us, double jain, double requestsPerAcq,
                     double retakenShare, int acquisitions) {}

    /**
     * Measures every library of {@code libs} and writes the section to {@code out}; returns it.
     * The first is lockgate's row the ratios are of, against each library whose name does not
     * start with "lockgate" (lockgate's other ways of calling have rows, not ratios).
     */
    static String run(Spec spec, Map<String, Factory> libs, int pairs, int rounds, double seconds, Path out) throws Exception {
        Map<String, List<Double>> rates = new LinkedHashMap<>();
        Map<String, Double> pairRequests = new LinkedHashMap<>();
        libs.keySet().forEach(k -> rates.put(k, new ArrayList<>()));
        int lib = 0;
        for (Map.Entry<String, Factory> e : libs.entrySet()) {
            pairRequests.put(e.getKey(), uncontendedRequests(e.getValue(), spec.prefix() + "u-req-" + lib++, spec.counter()));
        }
        for (int r = 0; r < rounds; r++) {
            lib = 0;
            for (Map.Entry<String, Factory> e : libs.entrySet()) {
                double rate = uncontended(e.getValue(), spec.prefix() + "u-" + lib++ + "-" + r, pairs);
                rates.get(e.getKey()).add(rate);
                System.err.printf(Locale.ROOT, "round %d: %s: %.0f pairs/s%n", r + 1, e.getKey(), rate);
            }
        }
        Map<String, Contended> contended = new LinkedHashMap<>();
        // Two runs per row, interleaved A B then B A; the row keeps the run with more
        // acquisitions (the one less disturbed by the rest of the shared machine).
        List<String> names = new ArrayList<>(libs.keySet());
        for (int workers : spec.workers()) {
            for (int run = 0; run < 2; run++) {
                for (int j = 0; j < names.size(); j++) {
                    String name = names.get(run == 0 ? j : names.size() - 1 - j);
                    String lock = spec.prefix() + "c-" + names.indexOf(name) + "-" + workers + "-" + run;
                    Contended c = contended(libs.get(name), lock, workers, seconds, spec.counter());
                    System.err.printf(Locale.ROOT, "%s, %d workers, run %d: %.0f acq/s, p50 %.0f us, p99 %.0f us, "
                            + "Jain %.3f, %.1f requests/acq%n", name, workers, run + 1, c.perSecond, c.p50us, c.p99us, c.jain,
                        c.requestsPerAcq);
                    contended.merge(name + "|" + workers, c, (a, b) -> b.perSecond > a.perSecond ? b : a);
                }
            }
        }
        String md = markdown(spec, pairs, rounds, seconds, rates, pairRequests, contended);
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, md);
        System.out.print(md);
        return md;
    }

    /** Sequential acquire+release pairs per second on one client (after a warm-up of 50 pairs). */
    static double uncontended(Factory f, String name, int pairs) throws Exception {
        try (Locker l = f.open(name)) {
            for (int i = 0; i < 50; i++) {
                l.lock();
                l.unlock();
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < pairs; i++) {
                l.lock();
                l.unlock();
            }
            return pairs / ((System.nanoTime() - t0) / 1e9);
        }
    }

    /** Requests the server received per uncontended acquire+release (200 pairs, warm). */
    static double uncontendedRequests(Factory f, String name, LongSupplier counter) throws Exception {
        try (Locker l = f.open(name)) {
            for (int i = 0; i < 20; i++) {
                l.lock();
                l.unlock();
            }
            int n = 200;
            long before = counter.getAsLong();
            for (int i = 0; i < n; i++) {
                l.lock();
                l.unlock();
            }
            return (counter.getAsLong() - before - 1) / (double) n; // minus the first reading itself
        }
    }

    /**
     * WORKERS threads with a client each loop acquire → hold ~1 ms → release → at once again;
     * measured for SECONDS after 0.5 s of warm-up.
     */
    static Contended contended(Factory f, String name, int workers, double seconds, LongSupplier counter) throws Exception {
        List<Locker> lockers = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            lockers.add(f.open(name));
        }
        ExecutorService pool = Executors.newFixedThreadPool(workers);
        CountDownLatch ready = new CountDownLatch(workers);
        long origin = System.nanoTime();
        long from = origin + 500_000_000L;
        long until = from + (long) (seconds * 1e9);
        List<Future<List<long[]>>> fs = new ArrayList<>();
        try {
            for (int w = 0; w < workers; w++) {
                Locker l = lockers.get(w);
                int id = w;
                fs.add(pool.submit(() -> {
                    List<long[]> recs = new ArrayList<>();
                    ready.countDown();
                    while (System.nanoTime() < until) {
                        l.lock();
                        long acquired = System.nanoTime();
                        LockSupport.parkNanos(HOLD_NANOS);
                        long releasing = System.nanoTime();
                        l.unlock();
                        if (acquired >= from && acquired < until) {
                            recs.add(new long[] {acquired, releasing, id});
                        }
                    }
                    return recs;
                }));
            }
            ready.await();
            sleepUntil(from);
            long before = counter.getAsLong();
            sleepUntil(until);
            long after = counter.getAsLong();
            List<long[]> recs = new ArrayList<>();
            for (Future<List<long[]>> fut : fs) {
                recs.addAll(fut.get(WAIT.toMillis(), TimeUnit.MILLISECONDS));
            }
            recs.sort((a, b) -> Long.compare(a[0], b[0]));
            List<Double> gaps = new ArrayList<>();
            int retaken = 0;
            for (int i = 1; i < recs.size(); i++) {
                long[] prev = recs.get(i - 1);
                long[] next = recs.get(i);
                if (next[0] < prev[1]) {
                    throw new IllegalStateException("two holders at once");
                }
                gaps.add((next[0] - prev[1]) / 1e3);
                if (next[2] == prev[2]) {
                    retaken++;
                }
            }
            gaps.sort(Double::compare);
            long[] per = new long[workers];
            recs.forEach(r -> per[(int) r[2]]++);
            double sum = 0;
            double sq = 0;
            for (long x : per) {
                sum += x;
                sq += (double) x * x;
            }
            double jain = sq == 0 ? Double.NaN : sum * sum / (workers * sq);
            int n = recs.size();
            return new Contended(n / seconds, JvmBench.percentile(gaps, 50), JvmBench.percentile(gaps, 99), jain,
                n == 0 ? Double.NaN : (after - before - 1) / (double) n, n <= 1 ? 0 : retaken / (double) (n - 1), n);
        } finally {
            pool.shutdownNow();
            pool.awaitTermination(10, TimeUnit.SECONDS);
            lockers.forEach(Locker::close);
        }
    }

    private static void sleepUntil(long nanoTime) throws InterruptedException {
        long left;
        while ((left = nanoTime - System.nanoTime()) > 0) {
            TimeUnit.NANOSECONDS.sleep(left);
        }
    }

    private static String ratio(double ours, double theirs, boolean higherIsBetter) {
        if (Double.isNaN(ours) || Double.isNaN(theirs) || ours == 0 || theirs == 0) {
            return "—";
        }
        boolean better = higherIsBetter ? ours >= theirs : ours <= theirs;
        double r = higherIsBetter ? ours / theirs : theirs / ours;
        if (Math.abs(r - 1) < 0.005) {
            return "equal";
        }
        return String.format(Locale.ROOT, "%.2f× %s", better ? r : 1 / r, better ? "better" : "worse");
    }

    static String markdown(Spec spec, int pairs, int rounds, double seconds, Map<String, List<Double>> rates,
                           Map<String, Double> pairRequests, Map<String, Contended> contended) {
        StringBuilder sb = new StringBuilder();
        sb.append("## ").append(spec.heading()).append("\n\n").append(spec.setup()).append("\n\n");
        sb.append(String.format(Locale.ROOT, "**Uncontended acquire + release**, one client, one thread; %d interleaved "
            + "rounds of %d pairs per library (after 50 warm-up pairs): best and median round (higher is better). "
            + "Requests: what the server received per pair (%s), over 200 pairs.%n%n", rounds, pairs, spec.requestsHow()));
        sb.append("| library | pairs/s, best | pairs/s, median | ").append(spec.requests()).append(" per pair | lockgate is (median) |\n");
        sb.append("|---|---:|---:|---:|---:|\n");
        String ours = rates.keySet().iterator().next();
        double oursMed = median(rates.get(ours));
        for (Map.Entry<String, List<Double>> e : rates.entrySet()) {
            double best = e.getValue().stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
            double med = median(e.getValue());
            sb.append(String.format(Locale.ROOT, "| %s | %,.0f | %,.0f | %.1f | %s |%n", e.getKey(), best, med,
                pairRequests.get(e.getKey()), e.getKey().startsWith("lockgate") ? "—" : ratio(oursMed, med, true)));
        }
        sb.append(String.format(Locale.ROOT, "%n**Contended**: one lock, each worker loops acquire → hold ~1 ms → release "
            + "→ acquire again at once, measured for %.1f s after 0.5 s of warm-up; two runs per row (libraries "
            + "interleaved A B, B A), the row shows the run with more acquisitions. Handoff = one holder starting its "
            + "release → the next holder's acquire returning. Jain = (Σx)² / (n·Σx²) over the workers' acquisition counts "
            + "(1.0 = perfectly even). Requests per acquisition: what the server received over the window (%s) divided "
            + "by the acquisitions.%n%n", seconds, spec.requestsHow()));
        sb.append("| workers | library | acquisitions/s | handoff p50 | handoff p99 | Jain | ").append(spec.requests())
            .append(" per acquisition | re-taken by releaser |\n");
        sb.append("|---:|---|---:|---:|---:|---:|---:|---:|\n");
        for (int workers : spec.workers()) {
            for (String libName : rates.keySet()) {
                Contended c = contended.get(libName + "|" + workers);
                sb.append(String.format(Locale.ROOT, "| %d | %s | %,.0f | %.0f µs | %.0f µs | %.3f | %.1f | %.1f%% |%n",
                    workers, libName, c.perSecond, c.p50us, c.p99us, c.jain, c.requestsPerAcq, 100 * c.retakenShare));
            }
        }
        List<String> names = new ArrayList<>(rates.keySet());
        for (String theirs : names.stream().filter(n -> !n.startsWith("lockgate")).toList()) {
            List<String> parts = new ArrayList<>();
            parts.add("uncontended " + ratio(oursMed, median(rates.get(theirs)), true));
            for (int workers : spec.workers()) {
                Contended a = contended.get(ours + "|" + workers);
                Contended b = contended.get(theirs + "|" + workers);
                parts.add(String.format(Locale.ROOT, "%d workers: acquisitions/s %s, handoff p50 %s, p99 %s, requests %s",
                    workers, ratio(a.perSecond, b.perSecond, true), ratio(a.p50us, b.p50us, false),
                    ratio(a.p99us, b.p99us, false), ratio(a.requestsPerAcq, b.requestsPerAcq, false)));
            }
            sb.append("\nlockgate against ").append(theirs).append(", row by row: ").append(String.join("; ", parts)).append(".\n");
        }
        if (!spec.remark().isEmpty()) {
            sb.append("\n").append(spec.remark()).append("\n");
        }
        return sb.toString();
    }

    /** A library's version, from its jar's name on the class path (Maven's repository layout). */
    static String jarVersion(String artifact) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile(artifact + "-([0-9][^/:]*)\\.jar")
            .matcher(System.getProperty("java.class.path"));
        return m.find() ? m.group(1) : "?";
    }

    static double median(List<Double> xs) {
        List<Double> s = new ArrayList<>(xs);
        s.sort(Double::compare);
        int n = s.size();
        return n == 0 ? Double.NaN : n % 2 == 1 ? s.get(n / 2) : (s.get(n / 2 - 1) + s.get(n / 2)) / 2;
    }
}
