package io.lockgate;

import static io.lockgate.TestUtil.key;
import static io.lockgate.TestUtil.liveKeys;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Opt-in reentrancy: the lease API re-enters per handle object, the Lock interface per thread. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ReentrantLockTest extends RedisTestBase {
    private static final LockOptions REENTRANT = LockOptions.builder().reentrant(true).build();

    @Test
    void leasesCountHolds() throws Exception {
        DistributedLock lock = client.getLock("re-lease", REENTRANT);
        assertTrue(lock.isReentrant());
        DistributedLock probe = client.getLock("re-lease");
        Lease outer = lock.acquire(Duration.ofSeconds(1));
        long t0 = System.nanoTime();
        Lease inner = lock.acquire(Duration.ofSeconds(1));
        assertTrue((System.nanoTime() - t0) / 1_000_000 < 500, "re-entered at once");
        assertEquals(outer.fencingToken().getAsLong(), inner.fencingToken().getAsLong(), "the same lease, the same token");
        Lease third = lock.tryAcquire().orElseThrow(() -> new AssertionError("tryAcquire re-enters"));
        assertTrue(probe.tryAcquire().isEmpty(), "a non-reentrant handle does not re-enter");
        third.close();
        assertTrue(inner.release(), "one hold given back");
        assertFalse(inner.release(), "a hold is given back once");
        assertTrue(probe.tryAcquire().isEmpty(), "still held by the outer hold");
        assertTrue(outer.isHeld());
        outer.close();
        try (Lease p = probe.tryAcquire().orElseThrow(() -> new AssertionError("free after the last release"))) {
            assertTrue(p.fencingToken().getAsLong() > outer.fencingToken().getAsLong());
        }
        assertEquals(List.of(), liveKeys(raw, "re-lease"));
    }

    // Through java.util.concurrent.locks.Lock the thread is the owner (like ReentrantLock):
    // getHoldCount() counts its holds; another thread sharing the same object does not re-enter,
    // it waits, and cannot unlock the owner's hold.
    @Test
    void lockInterfaceCountsHoldsPerThread() throws Exception {
        DistributedLock lock = client.getLock("re-jdk", REENTRANT);
        assertEquals(0, lock.getHoldCount());
        lock.lock();
        lock.lock();
        assertTrue(lock.tryLock(), "tryLock re-enters too");
        assertEquals(3, lock.getHoldCount());
        assertTrue(lock.isHeldByCurrentThread());
        long token = lock.currentLease().orElseThrow().fencingToken().getAsLong();
        CompletableFuture<String> other = CompletableFuture.supplyAsync(() -> {
            String seen = lock.getHoldCount() + "," + lock.isHeldByCurrentThread() + "," + lock.tryLock();
            try {
                lock.unlock();
                return seen + ",unlocked";
            } catch (IllegalMonitorStateException e) {
                return seen + ",IMSE";
            }
        });
        assertEquals("0,false,false,IMSE", other.get(5, TimeUnit.SECONDS),
            "another thread sharing the object: no holds, no re-entry, no unlock");
        assertEquals(3, lock.getHoldCount());
        lock.unlock();
        lock.unlock();
        assertEquals(1, lock.getHoldCount());
        assertEquals(1L, raw.num("EXISTS", key("re-jdk", "")), "still held on the server");
        lock.unlock();
        assertEquals(0, lock.getHoldCount());
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertTrue(CompletableFuture.supplyAsync(() -> {
            if (!lock.tryLock()) {
                return false;
            }
            long next = lock.currentLease().orElseThrow().fencingToken().getAsLong();
            lock.unlock();
            return next > token;
        }).get(5, TimeUnit.SECONDS), "free for another thread, with a newer token");
        assertEquals(List.of(), liveKeys(raw, "re-jdk"));
    }

    // Curator's TestInterProcessMutex (reentrant single lock, many threads): threads sharing ONE
    // reentrant lock object, each re-entering, are never inside together. Before issue 13 the
    // object re-entered for any thread, and two threads were inside at once.
    @Test
    void threadsSharingOneReentrantObjectNeverOverlap() throws Exception {
        DistributedLock lock = client.getLock("re-curator", REENTRANT);
        AtomicBoolean inside = new AtomicBoolean();
        AtomicInteger overlaps = new AtomicInteger();
        int threads = 4;
        int rounds = 5;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            fs.add(pool.submit(() -> {
                for (int i = 0; i < rounds; i++) {
                    lock.lock();
                    try {
                        if (!inside.compareAndSet(false, true)) {
                            overlaps.incrementAndGet();
                        }
                        lock.lock(); // re-entry by the holding thread
                        try {
                            assertEquals(2, lock.getHoldCount());
                            Thread.sleep(5);
                        } finally {
                            lock.unlock();
                        }
                        assertEquals(1, lock.getHoldCount());
                        inside.set(false);
                    } finally {
                        lock.unlock();
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : fs) {
            f.get(30, TimeUnit.SECONDS);
        }
        pool.shutdown();
        assertEquals(0, overlaps.get(), "two threads were inside the critical section at once");
        assertEquals(List.of(), liveKeys(raw, "re-curator"));
    }

    @Test
    void readWriteHalvesReenter() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("re-rw", REENTRANT);
        DistributedReadWriteLock plain = client.getReadWriteLock("re-rw");
        Lease w1 = rw.writeLock().acquire(Duration.ofSeconds(1));
        Lease w2 = rw.writeLock().tryAcquire().orElseThrow(() -> new AssertionError("the write half re-enters"));
        assertEquals(w1.fencingToken().getAsLong(), w2.fencingToken().getAsLong());
        assertTrue(w2.release());
        assertTrue(plain.readLock().tryAcquire().isEmpty(), "still write-held");
        assertTrue(w1.release());
        Lease r1 = rw.readLock().acquire(Duration.ofSeconds(1));
        Lease r2 = rw.readLock().acquire(Duration.ofSeconds(1));
        assertEquals(r1.fencingToken().getAsLong(), r2.fencingToken().getAsLong(), "the read half re-enters with its own lease");
        assertEquals(1L, raw.num("ZCARD", key("re-rw", ":rw:holders")), "one reader on the server");
        r2.close();
        r1.close();
        assertEquals(List.of(), liveKeys(raw, "re-rw"));
    }

    @Test
    void optionsShowTheFlag() {
        assertEquals(REENTRANT, LockOptions.builder().reentrant(true).build());
        assertTrue(REENTRANT.toString().contains("reentrant=true"), REENTRANT.toString());
        assertEquals(null, LockOptions.defaults().reentrant());
        assertFalse(client.getLock("re-flag").isReentrant());
    }
}
