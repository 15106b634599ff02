package io.lockgate;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
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
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;

/**
 * Issue 15's JVM benchmark: lockgate's Java binding against Curator's {@code InterProcessMutex}
 * on one real ZooKeeper server from the project's launcher, in one run. Uncontended
 * acquire+release pairs per second (interleaved rounds, best and median), and contended
 * acquisitions per second with 4 and 16 workers holding ~1 ms and re-acquiring at once: handoff
 * p50/p99, Jain's fairness index over the workers' acquisitions, and ZooKeeper requests per
 * acquisition (the server's own {@code srvr} "Received" count over the measured window, pings
 * included). One client (one ZooKeeper session) per worker for both libraries.
 *
 * <p>Args: OUT_MD COMMAND [PAIRS] [ROUNDS] [SECONDS] [ONLY] (ONLY: {@code lockgate} or {@code curator}, to
 * measure one library alone while developing; the table then has no comparison).
 */
public final class ZkBench {
    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final long HOLD_NANOS = 1_000_000L;
    private static final int[] WORKERS = {4, 16};

    /** One library's lock as the benchmark drives it: its own client per instance. */
    interface Locker extends AutoCloseable {
        void lock() throws Exception;

        void unlock() throws Exception;

        @Override
        void close();
    }

    /** lockgate: {@code acquire(timeout)} returns the lease, {@code close()} releases it. */
    static final class LockgateLocker implements Locker {
        private final LockgateClient client;
        private final DistributedLock lock;
        private Lease lease;

        LockgateLocker(String url, String path) {
            client = LockgateClient.connect(url);
            lock = client.getLock(path);
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

    /** Curator with its defaults: {@code InterProcessMutex.acquire()} / {@code release()}. */
    static final class CuratorLocker implements Locker {
        private final CuratorFramework curator;
        private final InterProcessMutex mutex;

        CuratorLocker(ZooKeeperServer zk, String path) {
            curator = zk.curator();
            mutex = new InterProcessMutex(curator, path);
        }

        @Override
        public void lock() throws Exception {
            if (!mutex.acquire(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("Curator acquire timed out");
            }
        }

        @Override
        public void unlock() throws Exception {
            mutex.release();
        }

        @Override
        public void close() {
            curator.close();
        }
    }

    interface Factory {
        Locker open(String path) throws Exception;
    }

    /** Contended figures of one library at one worker count. */
    record Contended(double perSecond, double p50us, double p99us, double jain, double requestsPerAcq,
                     double retakenShare, int acquisitions) {}

    public static void main(String[] args) throws Exception {
        Path out = Paths.get(args[0]);
        String command = args[1];
        int pairs = args.length > 2 ? Integer.parseInt(args[2]) : 1000;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 3;
        double seconds = args.length > 4 ? Double.parseDouble(args[4]) : 3.0;
        String only = args.length > 5 ? args[5] : "";
        try (ZooKeeperServer zk = ZooKeeperServer.start()) {
            String member = zk.connectString().split(",")[0];
            Map<String, Factory> libs = new LinkedHashMap<>();
            if (!only.equals("curator")) {
                libs.put("lockgate", path -> new LockgateLocker(zk.url(), path));
            }
            if (!only.equals("lockgate")) {
                libs.put("Curator `InterProcessMutex`", path -> new CuratorLocker(zk, path));
            }

            Map<String, List<Double>> rates = new LinkedHashMap<>();
            Map<String, Double> pairRequests = new LinkedHashMap<>();
            libs.keySet().forEach(k -> rates.put(k, new ArrayList<>()));
            int lib = 0;
            for (Map.Entry<String, Factory> e : libs.entrySet()) {
                pairRequests.put(e.getKey(), uncontendedRequests(e.getValue(), "/bench/u-req-" + lib++, member));
            }
            for (int r = 0; r < rounds; r++) {
                lib = 0;
                for (Map.Entry<String, Factory> e : libs.entrySet()) {
                    double rate = uncontended(e.getValue(), "/bench/u-" + lib++ + "-" + r, pairs);
                    rates.get(e.getKey()).add(rate);
                    System.err.printf(Locale.ROOT, "round %d: %s: %.0f pairs/s%n", r + 1, e.getKey(), rate);
                }
            }
            Map<String, Contended> contended = new LinkedHashMap<>();
            // Two runs per row, interleaved A B then B A; the row keeps the run with more
            // acquisitions (the one less disturbed by the rest of the shared machine).
            List<String> names = new ArrayList<>(libs.keySet());
            for (int workers : WORKERS) {
                for (int run = 0; run < 2; run++) {
                    for (int j = 0; j < names.size(); j++) {
                        String name = names.get(run == 0 ? j : names.size() - 1 - j);
                        Contended c = contended(libs.get(name), "/bench/c-" + names.indexOf(name) + "-" + workers + "-" + run,
                            workers, seconds, member);
                        System.err.printf(Locale.ROOT, "contended %s, %d workers, run %d: %.0f acq/s, p50 %.0f µs, p99 %.0f µs, "
                            + "Jain %.3f, %.1f requests/acq%n", name, workers, run + 1, c.perSecond, c.p50us, c.p99us, c.jain,
                            c.requestsPerAcq);
                        contended.merge(name + "|" + workers, c, (a, b) -> b.perSecond > a.perSecond ? b : a);
                    }
                }
            }
            String md = markdown(command, fourLetter(member, "srvr"), pairs, rounds, seconds, rates, pairRequests, contended);
            Files.createDirectories(out.toAbsolutePath().getParent());
            Files.writeString(out, md);
            System.out.print(md);
        }
        System.exit(0);
    }

    /** Sequential acquire+release pairs per second on one client (after a warm-up of 50 pairs). */
    static double uncontended(Factory f, String path, int pairs) throws Exception {
        try (Locker l = f.open(path)) {
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

    /** ZooKeeper requests the server received per uncontended acquire+release (200 pairs, warm). */
    static double uncontendedRequests(Factory f, String path, String member) throws Exception {
        try (Locker l = f.open(path)) {
            for (int i = 0; i < 20; i++) {
                l.lock();
                l.unlock();
            }
            int n = 200;
            long before = received(member);
            for (int i = 0; i < n; i++) {
                l.lock();
                l.unlock();
            }
            return (received(member) - before - 1) / (double) n; // minus the first srvr itself
        }
    }

    /**
     * WORKERS threads with a client each loop acquire → hold ~1 ms → release → at once again;
     * measured for SECONDS after 0.5 s of warm-up.
     */
    static Contended contended(Factory f, String path, int workers, double seconds, String member) throws Exception {
        List<Locker> lockers = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            lockers.add(f.open(path));
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
            long before = received(member);
            sleepUntil(until);
            long after = received(member);
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

    /** The server's count of requests received ({@code srvr} "Received:"), or -1 if it does not answer 4lw. */
    static long received(String member) {
        for (String line : fourLetter(member, "srvr").split("\n")) {
            if (line.startsWith("Received:")) {
                return Long.parseLong(line.substring("Received:".length()).trim());
            }
        }
        return -1;
    }

    /** A ZooKeeper four-letter-word command's reply (empty if refused). */
    static String fourLetter(String member, String cmd) {
        int colon = member.lastIndexOf(':');
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(member.substring(0, colon), Integer.parseInt(member.substring(colon + 1))), 5000);
            s.setSoTimeout(5000);
            OutputStream o = s.getOutputStream();
            o.write(cmd.getBytes(StandardCharsets.US_ASCII));
            o.flush();
            InputStream in = s.getInputStream();
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "";
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

    static String markdown(String command, String srvr, int pairs, int rounds, double seconds,
                           Map<String, List<Double>> rates, Map<String, Double> pairRequests,
                           Map<String, Contended> contended) {
        String version = "?";
        for (String l : srvr.split("\n")) {
            if (l.startsWith("Zookeeper version:")) {
                version = l.substring("Zookeeper version:".length()).trim().split("[-,]")[0];
            }
        }
        StringBuilder sb = new StringBuilder();
        sb.append("## JVM binding on ZooKeeper: lockgate vs Curator `InterProcessMutex`\n\n");
        sb.append("Command: `").append(command).append("` (runs `io.lockgate.ZkBench`).\n\n");
        sb.append(String.format(Locale.ROOT, "Setup: one ZooKeeper %s server on loopback from the project's launcher "
                + "(`test-servers zookeeper`), Java %s, %d cores (shared), Curator %s with its defaults "
                + "(`ExponentialBackoffRetry`, 60 s session); lockgate's default lock (its default session timeout). "
                + "One client (one ZooKeeper session) per worker for both.\n\n",
            version, System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(),
            curatorVersion()));
        sb.append(String.format(Locale.ROOT, "**Uncontended acquire + release**, one client, one thread; %d interleaved "
            + "rounds of %d pairs per library (after 50 warm-up pairs): best and median round (higher is better). "
            + "Requests: what the server received per pair (`srvr`), over 200 pairs.%n%n", rounds, pairs));
        sb.append("| library | pairs/s, best | pairs/s, median | ZooKeeper requests per pair | lockgate is (median) |\n");
        sb.append("|---|---:|---:|---:|---:|\n");
        String ours = rates.keySet().iterator().next();
        double oursMed = median(rates.get(ours));
        for (Map.Entry<String, List<Double>> e : rates.entrySet()) {
            double best = e.getValue().stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
            double med = median(e.getValue());
            sb.append(String.format(Locale.ROOT, "| %s | %,.0f | %,.0f | %.1f | %s |%n", e.getKey(), best, med,
                pairRequests.get(e.getKey()), e.getKey().equals(ours) ? "—" : ratio(oursMed, med, true)));
        }
        sb.append(String.format(Locale.ROOT, "%n**Contended**: one lock, each worker loops acquire → hold ~1 ms → release "
            + "→ acquire again at once, measured for %.1f s after 0.5 s of warm-up; two runs per row (libraries "
            + "interleaved A B, B A), the row shows the run with more acquisitions. Handoff = one holder starting its "
            + "release → the next holder's acquire returning. Jain = (Σx)² / (n·Σx²) over the workers' acquisition counts "
            + "(1.0 = perfectly even). Requests per acquisition: what the server received over the window (`srvr`, pings "
            + "included) divided by the acquisitions.%n%n", seconds));
        sb.append("| workers | library | acquisitions/s | handoff p50 | handoff p99 | Jain | ZooKeeper requests per acquisition | re-taken by releaser |\n");
        sb.append("|---:|---|---:|---:|---:|---:|---:|---:|\n");
        for (int workers : WORKERS) {
            for (String libName : rates.keySet()) {
                Contended c = contended.get(libName + "|" + workers);
                sb.append(String.format(Locale.ROOT, "| %d | %s | %,.0f | %.0f µs | %.0f µs | %.3f | %.1f | %.1f%% |%n",
                    workers, libName, c.perSecond, c.p50us, c.p99us, c.jain, c.requestsPerAcq, 100 * c.retakenShare));
            }
        }
        if (rates.size() < 2) {
            return sb.toString();
        }
        sb.append("\nlockgate against Curator, row by row: ");
        List<String> parts = new ArrayList<>();
        String theirs = new ArrayList<>(rates.keySet()).get(1);
        parts.add("uncontended " + ratio(oursMed, median(rates.get(theirs)), true));
        for (int workers : WORKERS) {
            Contended a = contended.get(ours + "|" + workers);
            Contended b = contended.get(theirs + "|" + workers);
            parts.add(String.format(Locale.ROOT, "%d workers: acquisitions/s %s, handoff p50 %s, p99 %s, requests %s",
                workers, ratio(a.perSecond, b.perSecond, true), ratio(a.p50us, b.p50us, false),
                ratio(a.p99us, b.p99us, false), ratio(a.requestsPerAcq, b.requestsPerAcq, false)));
        }
        sb.append(String.join("; ", parts)).append(".\n");
        // Where lockgate is behind, the requests column is equal: the gap is not on the wire.
        sb.append("\nWhere lockgate is slower here, both send the same ZooKeeper requests (the requests columns), so the ")
            .append("gap is not on the wire: it is the Java binding's cost per pair (measured against the native core on Redis, ")
            .append("the JVM section) plus the core's own ZooKeeper client path, which Curator, a JVM library, does not have.\n");
        return sb.toString();
    }

    /** Curator's version, from its jar's name on the class path (Maven's repository layout). */
    static String curatorVersion() {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("curator-recipes-([0-9][^/:]*)\\.jar")
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
