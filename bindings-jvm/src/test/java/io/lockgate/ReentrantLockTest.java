package io.lockgate;

import static io.lockgate.TestUtil.key;
import static io.lockgate.TestUtil.liveKeys;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Opt-in reentrancy: holds are counted per handle object, never per thread. */
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
        assertEquals(outer.fencingToken(), inner.fencingToken(), "the same lease, the same token");
        Lease third = lock.tryAcquire().orElseThrow(() -> new AssertionError("tryAcquire re-enters"));
        assertTrue(probe.tryAcquire().isEmpty(), "a non-reentrant handle does not re-enter");
        third.close();
        assertTrue(inner.release(), "one hold given back");
        assertFalse(inner.release(), "a hold is given back once");
        assertTrue(probe.tryAcquire().isEmpty(), "still held by the outer hold");
        assertTrue(outer.isHeld());
        outer.close();
        try (Lease p = probe.tryAcquire().orElseThrow(() -> new AssertionError("free after the last release"))) {
            assertTrue(p.fencingToken() > outer.fencingToken());
        }
        assertEquals(List.of(), liveKeys(raw, "re-lease"));
    }

    // Through java.util.concurrent.locks.Lock: lock twice, unlock twice; the handle is the owner,
    // so another thread using the same object re-enters too.
    @Test
    void lockInterfaceCountsHoldsPerHandleNotThread() throws Exception {
        DistributedLock lock = client.getLock("re-jdk", REENTRANT);
        DistributedLock other = client.getLock("re-jdk", REENTRANT);
        lock.lock();
        lock.lock();
        assertEquals(2, lock.holdCount());
        CompletableFuture.runAsync(lock::lock).get(5, TimeUnit.SECONDS);
        assertEquals(3, lock.holdCount(), "another thread re-enters through the same handle");
        assertFalse(other.tryLock(), "another handle does not re-enter, even on the same client");
        long token = lock.currentLease().orElseThrow().fencingToken();
        lock.unlock();
        CompletableFuture.runAsync(lock::unlock).get(5, TimeUnit.SECONDS);
        assertEquals(1, lock.holdCount());
        assertTrue(lock.isHeldByThisLock());
        assertFalse(other.tryLock(50, TimeUnit.MILLISECONDS));
        lock.unlock();
        assertEquals(0, lock.holdCount());
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertTrue(other.tryLock());
        assertTrue(other.currentLease().orElseThrow().fencingToken() > token);
        other.unlock();
        assertEquals(List.of(), liveKeys(raw, "re-jdk"));
    }

    @Test
    void readWriteHalvesReenter() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("re-rw", REENTRANT);
        DistributedReadWriteLock plain = client.getReadWriteLock("re-rw");
        Lease w1 = rw.writeLock().acquire(Duration.ofSeconds(1));
        Lease w2 = rw.writeLock().tryAcquire().orElseThrow(() -> new AssertionError("the write half re-enters"));
        assertEquals(w1.fencingToken(), w2.fencingToken());
        assertTrue(w2.release());
        assertTrue(plain.readLock().tryAcquire().isEmpty(), "still write-held");
        assertTrue(w1.release());
        Lease r1 = rw.readLock().acquire(Duration.ofSeconds(1));
        Lease r2 = rw.readLock().acquire(Duration.ofSeconds(1));
        assertEquals(r1.fencingToken(), r2.fencingToken(), "the read half re-enters with its own lease");
        assertEquals(1L, raw.num("ZCARD", key("re-rw", ":rw:holders")), "one reader on the server");
        r2.close();
        r1.close();
        assertEquals(List.of(), liveKeys(raw, "re-rw"));
    }

    @Test
    void optionsShowTheFlag() {
        assertEquals(REENTRANT, LockOptions.builder().reentrant(true).build());
        assertTrue(REENTRANT.toString().contains("reentrant=true"), REENTRANT.toString());
        assertEquals(java.util.Optional.empty(), LockOptions.defaults().reentrant());
        assertFalse(client.getLock("re-flag").isReentrant());
    }
}
