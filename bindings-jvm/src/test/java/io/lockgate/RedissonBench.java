package io.lockgate;

import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.Lock;
import org.redisson.Redisson;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Issue 30's Redis comparison on the JVM: lockgate's Java binding against Redisson's {@code
 * RLock} and {@code RFencedLock} on one real redis-server from the project's launcher, in one
 * run ({@link PeerBench}: 4 and 16 workers; requests are the commands the server ran, from {@code
 * INFO commandstats}: a script's own calls counted with it). One client per worker for every
 * library.
 *
 * <p>Args: OUT_MD COMMAND [PAIRS] [ROUNDS] [SECONDS]
 */
public final class RedissonBench {
    private RedissonBench() {}

    /** lockgate through {@code java.util.concurrent.locks.Lock}: {@code lock()} / {@code unlock()}, held per thread. */
    static final class LockgateLockLocker implements PeerBench.Locker {
        private final LockgateClient client;
        private final Lock lock;

        LockgateLockLocker(String url, String name) {
            client = LockgateClient.connect(url);
            lock = client.getLock(name);
        }

        @Override
        public void lock() {
            lock.lock();
        }

        @Override
        public void unlock() {
            lock.unlock();
        }

        @Override
        public void close() {
            client.close();
        }
    }

    /** Redisson: {@code RLock.lock()} (its watchdog renews the lease) or {@code RFencedLock.lockAndGetToken()}, then {@code unlock()}. */
    static final class RedissonLocker implements PeerBench.Locker {
        private final RedissonClient redisson;
        private final RLock lock;
        private final boolean fenced;

        RedissonLocker(String url, String name, boolean fenced) {
            Config config = new Config();
            // One connection kept idle instead of 24: a client per worker, 16 workers.
            config.useSingleServer().setAddress(url).setConnectionMinimumIdleSize(1);
            redisson = Redisson.create(config);
            this.fenced = fenced;
            lock = fenced ? redisson.getFencedLock(name) : redisson.getLock(name);
        }

        @Override
        public void lock() {
            if (fenced) {
                JvmBench.blackhole(((RFencedLock) lock).lockAndGetToken());
            } else {
                lock.lock();
            }
        }

        @Override
        public void unlock() {
            lock.unlock();
        }

        @Override
        public void close() {
            redisson.shutdown();
        }
    }

    public static void main(String[] args) throws Exception {
        String command = args[1];
        int pairs = args.length > 2 ? Integer.parseInt(args[2]) : 2000;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 3;
        double seconds = args.length > 4 ? Double.parseDouble(args[4]) : 3.0;
        try (RedisServer server = RedisServer.start(); Resp raw = server.raw()) {
            String url = server.url();
            Map<String, PeerBench.Factory> libs = new LinkedHashMap<>();
            libs.put("lockgate `acquire` + `close()`", name -> new PeerBench.LockgateLocker(url, name));
            libs.put("lockgate `lock()` + `unlock()`", name -> new LockgateLockLocker(url, name));
            libs.put("Redisson `RLock`", name -> new RedissonLocker(url, name, false));
            libs.put("Redisson `RFencedLock`", name -> new RedissonLocker(url, name, true));
            String setup = String.format(Locale.ROOT, "Command: `%s` (runs `io.lockgate.RedissonBench`).%n%n"
                    + "Setup: one redis-server %s on loopback from the project's launcher, Java %s, %d cores (shared), "
                    + "Redisson %s with its defaults (30 s lease renewed by its watchdog; waiters woken through pub/sub) but "
                    + "one idle connection per client instead of 24 (a client per worker); lockgate's default lock (30 s "
                    + "lease renewed; a FIFO queue, each waiter woken by its predecessor's release, a fencing token per grant). "
                    + "`RLock` has neither queue nor token; `RFencedLock` adds a token, not a queue.",
                command, JvmBench.redisVersion(server), System.getProperty("java.version"),
                Runtime.getRuntime().availableProcessors(), PeerBench.jarVersion("redisson"));
            PeerBench.Spec spec = new PeerBench.Spec("JVM binding on Redis: lockgate vs Redisson `RLock` and `RFencedLock`",
                setup, "Redis commands", "`INFO commandstats`: every command run, a script's own calls included",
                () -> commandsRun(raw), "jvm-bench-redisson:", new int[] {4, 16}, "");
            PeerBench.run(spec, libs, pairs, rounds, seconds, Paths.get(args[0]));
        }
        System.exit(0);
    }

    /** Every command the server has run (the {@code calls} of each {@code INFO commandstats} line). */
    static long commandsRun(Resp raw) {
        long total = 0;
        for (String line : raw.str("INFO", "commandstats").split("\r\n")) {
            int at = line.indexOf(":calls=");
            if (line.startsWith("cmdstat_") && at > 0) {
                total += Long.parseLong(line.substring(at + ":calls=".length(), line.indexOf(',', at)));
            }
        }
        return total;
    }
}
