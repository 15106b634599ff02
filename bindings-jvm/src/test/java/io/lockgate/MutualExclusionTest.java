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

/** No lost updates, across threads of one JVM and across JVM processes. */
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
                            CounterWorker.increment(raw, "mx-shared-counter");
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
                            CounterWorker.increment(raw, "mx-leases-counter");
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

    // Two worker JVMs and this one increment the same counter under the same lock.
    @Test
    void twoJvmProcessesLoseNoUpdates() throws Exception {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        List<Process> workers = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            workers.add(new ProcessBuilder(java, "-cp", cp, CounterWorker.class.getName(),
                server.url(), String.valueOf(server.port), "mx-jvms", "mx-jvms-counter", "40")
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start());
        }
        List<Long> tokens = new ArrayList<>();
        try (LockgateClient client = LockgateClient.connect(server.url()); Resp raw = server.raw()) {
            DistributedLock lock = client.getLock("mx-jvms");
            for (int i = 0; i < 40; i++) {
                try (Lease lease = lock.acquire(Duration.ofSeconds(60))) {
                    tokens.add(lease.fencingToken().getAsLong());
                    CounterWorker.increment(raw, "mx-jvms-counter");
                }
            }
        }
        for (Process p : workers) {
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "worker JVM finished");
            assertEquals(0, p.exitValue(), "worker JVM exit status");
            for (String line : out.split("\n")) {
                if (!line.isBlank()) {
                    tokens.add(Long.parseLong(line.trim()));
                }
            }
        }
        try (Resp raw = server.raw()) {
            assertEquals("120", raw.str("GET", "mx-jvms-counter"), "no update lost across processes");
        }
        assertEquals(120, tokens.size());
        assertEquals(120, new HashSet<>(tokens).size(), "fencing tokens are unique across processes");
    }
}
