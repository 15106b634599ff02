package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** No lost updates across threads of one JVM (across processes: the conformance scenario mutual_exclusion). */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MutualExclusionTest {
    static RedisServer server;

    @BeforeAll
    static void start() {
        server = RedisServer.start();
    }

    @AfterAll
    static void stop() {
        server.close();
    }

    // Four threads share ONE lock object through java.util.concurrent.locks.Lock: the object is
    // the owner, yet the threads still exclude each other (each waits its turn on the server).
    @Test
    void threadsSharingOneLockObjectLoseNoUpdates() throws Exception {
        try (LockgateClient client = LockgateClient.connect(server.url()); Resp raw = server.raw()) {
            DistributedLock lock = client.getLock("mx-shared");
            AtomicInteger local = new AtomicInteger();
            List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
            ExecutorService pool = Executors.newFixedThreadPool(4);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                fs.add(pool.submit(() -> {
                    for (int i = 0; i < 25; i++) {
                        lock.lock();
                        try {
                            tokens.add(lock.currentLease().orElseThrow().fencingToken().getAsLong());
                            increment(raw, "mx-shared-counter");
                            int v = local.get(); // non-atomic on purpose: only the lock protects it
                            Thread.yield();
                            local.set(v + 1);
                        } finally {
                            lock.unlock();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
            pool.shutdown();
            assertEquals("100", raw.str("GET", "mx-shared-counter"));
            assertEquals(100, local.get());
            assertEquals(100, new HashSet<>(tokens).size(), "every grant has its own fencing token");
        }
    }

    // Four threads, one client each, through the lease API: tokens increase per thread.
    @Test
    void threadsWithLeasesLoseNoUpdates() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<List<Long>>> fs = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            fs.add(pool.submit(() -> {
                List<Long> tokens = new ArrayList<>();
                try (LockgateClient client = LockgateClient.connect(server.url()); Resp raw = server.raw()) {
                    DistributedLock lock = client.getLock("mx-leases");
                    for (int i = 0; i < 25; i++) {
                        try (Lease lease = lock.acquire(Duration.ofSeconds(30))) {
                            tokens.add(lease.fencingToken().getAsLong());
                            increment(raw, "mx-leases-counter");
                        }
                    }
                }
                return tokens;
            }));
        }
        List<Long> all = new ArrayList<>();
        for (Future<List<Long>> f : fs) {
            List<Long> tokens = f.get();
            for (int i = 1; i < tokens.size(); i++) {
                assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens of one client increase");
            }
            all.addAll(tokens);
        }
        pool.shutdown();
        try (Resp raw = server.raw()) {
            assertEquals("100", raw.str("GET", "mx-leases-counter"));
        }
        assertEquals(100, new HashSet<>(all).size());
    }


    /** GET, a pause that invites a race, SET: only mutual exclusion keeps it correct. */
    static void increment(Resp raw, String counter) throws InterruptedException {
        String v = raw.str("GET", counter);
        Thread.sleep(1);
        raw.call("SET", counter, String.valueOf((v == null ? 0 : Long.parseLong(v)) + 1));
    }
}
