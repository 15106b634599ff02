package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The README's example, as written, against a real server. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ReadmeExampleTest {
    final List<Long> written = new ArrayList<>();

    void write(long token) {
        written.add(token);
    }

    CompletableFuture<Void> doWorkAsync(long token) {
        return CompletableFuture.runAsync(() -> write(token));
    }

    @Test
    void readmeExampleRuns() throws Exception {
        try (RedisServer server = RedisServer.start()) {
            try (LockgateClient client = LockgateClient.connect(server.url())) {
                DistributedLock lock = client.getLock("orders:42");

                try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                    lease.onLost(reason -> System.err.println("lost: " + reason));
                    write(lease.fencingToken().getAsLong());
                }

                lock.lock();
                try {
                    write(lock.currentLease().orElseThrow().fencingToken().getAsLong());
                } finally {
                    lock.unlock();
                }

                Boolean released = lock.acquireAsync(Duration.ofSeconds(5))
                    .thenCompose(lease -> doWorkAsync(lease.fencingToken().getAsLong()).thenCompose(x -> lease.releaseAsync()))
                    .get(10, TimeUnit.SECONDS);
                assertTrue(released);
            }
        }
        assertEquals(3, written.size());
        assertTrue(written.get(0) < written.get(1) && written.get(1) < written.get(2), "tokens increase");
    }

    // The README's second example (semaphores, read-write locks, elections, reentrancy).
    @Test
    void readmePrimitivesExampleRuns() throws Exception {
        List<String> log = new ArrayList<>();
        try (RedisServer server = RedisServer.start();
             LockgateClient client = LockgateClient.connect(server.url())) {
            DistributedSemaphore quota = client.getSemaphore("api-quota", 5);
            try (Lease permit = quota.acquire(Duration.ofSeconds(10))) {
                log.add("api " + permit.fencingToken().getAsLong());
            }
            quota.tryAcquire().ifPresent(Lease::close);

            DistributedReadWriteLock rw = client.getReadWriteLock("catalog");
            try (Lease read = rw.readLock().acquire(Duration.ofSeconds(5))) { log.add("render"); }
            try (Lease write = rw.writeLock().acquire(Duration.ofSeconds(5))) { write(write.fencingToken().getAsLong()); }
            rw.writeLock().lock(); try { log.add("update"); } finally { rw.writeLock().unlock(); }
            DistributedReadWriteLock barging = rw.withWritersFirst(false);
            assertTrue(barging.readLock().tryLock());
            barging.readLock().unlock();

            LeaderElection election = client.getElection("scheduler");
            try (Lease leadership = election.campaign("node-7:8080")) {
                leadership.onLost(reason -> log.add("stop leading"));
                write(leadership.fencingToken().getAsLong());
                election.observe().ifPresent(l -> log.add(l.value() + " leads, term " + l.term() + ", " + l.remaining()));
            }

            DistributedLock lock = client.getLock("orders:42", LockOptions.builder().reentrant(true).build());
            try (Lease outer = lock.acquire(Duration.ofSeconds(5));
                 Lease inner = lock.acquire(Duration.ofSeconds(5))) {
                assertEquals(outer.fencingToken().getAsLong(), inner.fencingToken().getAsLong());
            }
            lock.lock();
            lock.lock();
            assertEquals(2, lock.getHoldCount());
            lock.unlock();
            lock.unlock();
            assertEquals(0, lock.getHoldCount());
            assertTrue(lock.tryLock());
            lock.unlock();
        }
        assertTrue(log.get(0).startsWith("api "), log.get(0));
        assertEquals(List.of("render", "update"), log.subList(1, 3));
        assertTrue(log.get(3).startsWith("node-7:8080 leads, term "), log.get(3));
        assertEquals(2, written.size());
    }
}
