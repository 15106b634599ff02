package io.lockgate;

import static io.lockgate.TestUtil.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** java.util.concurrent.locks.Lock behaviours, with the lock object (not the thread) as owner. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LockContractTest extends RedisTestBase {
    @Test
    void unlockWhenNotHeldIsIllegalMonitorState() {
        Lock lock = client.getLock("imse");
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        lock.lock();
        lock.unlock();
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "second unlock");
    }

    // Ownership is the object: another thread may unlock (async code, executors).
    @Test
    void anotherThreadMayUnlock() throws Exception {
        DistributedLock lock = client.getLock("handover");
        lock.lock();
        assertTrue(lock.isHeldByThisLock());
        CompletableFuture.runAsync(lock::unlock).get(5, TimeUnit.SECONDS);
        assertFalse(lock.isHeldByThisLock());
        assertEquals(0L, raw.num("EXISTS", key("handover", "")));
    }

    @Test
    void tryLockVariants() throws Exception {
        DistributedLock a = client.getLock("try");
        DistributedLock b = client.getLock("try");
        assertTrue(a.tryLock());
        assertFalse(b.tryLock(), "held by another lock object");
        long t0 = System.nanoTime();
        assertFalse(b.tryLock(150, TimeUnit.MILLISECONDS));
        long tookMs = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(tookMs >= 140 && tookMs < 2000, "waited about the timeout: " + tookMs + " ms");
        assertFalse(b.tryLock(0, TimeUnit.SECONDS), "zero: one attempt, no exception");
        assertFalse(b.tryLock(-5, TimeUnit.SECONDS), "negative: one attempt, no exception");
        assertThrows(IllegalMonitorStateException.class, b::unlock);
        a.unlock();
        assertTrue(b.tryLock(1, TimeUnit.SECONDS));
        b.unlock();
    }

    // A waiter blocked in lock() gets the lock when the holder unlocks.
    @Test
    void lockWaitsForUnlock() throws Exception {
        DistributedLock a = client.getLock("wait");
        DistributedLock b = client.getLock("wait");
        a.lock();
        CompletableFuture<Long> waiter = CompletableFuture.supplyAsync(() -> {
            b.lock();
            long token = b.currentLease().orElseThrow().fencingToken();
            b.unlock();
            return token;
        });
        Thread.sleep(150);
        assertFalse(waiter.isDone());
        long first = a.currentLease().orElseThrow().fencingToken();
        a.unlock();
        assertTrue(waiter.get(5, TimeUnit.SECONDS) > first);
    }

    @Test
    void newConditionIsUnsupportedWithAClearMessage() {
        UnsupportedOperationException e =
            assertThrows(UnsupportedOperationException.class, () -> client.getLock("cond").newCondition());
        assertTrue(e.getMessage().contains("Condition"), e.getMessage());
    }

    // A default wait limit makes lock() give up with a TIMEOUT, distinguishable by type.
    @Test
    void lockWithAWaitLimitTimesOut() throws Exception {
        DistributedLock holder = client.getLock("limit");
        holder.lock();
        DistributedLock limited = client.getLock("limit",
            LockOptions.builder().waitTimeout(Duration.ofMillis(200)).build());
        LockTimeoutException e = assertThrows(LockTimeoutException.class, limited::lock);
        assertEquals("TIMEOUT", e.code());
        assertTrue(e.isRetryable());
        assertThrows(LockTimeoutException.class, () -> limited.acquire());
        holder.unlock();
    }

    // unlock() after the lease was lost: IllegalMonitorStateException, with the reason as cause.
    @Test
    void unlockAfterLossIsIllegalMonitorStateWithCause() throws Exception {
        DistributedLock lock = client.getLock("lost-unlock", LockOptions.fixedLease(Duration.ofMillis(100)));
        lock.lock();
        Thread.sleep(250);
        IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertTrue(e.getCause() instanceof LockNotHeldException, String.valueOf(e.getCause()));
        assertFalse(lock.isHeldByThisLock());
    }

    // lock() is not interruptible: it acquires and leaves the interrupt status set.
    @Test
    void lockKeepsTheInterruptStatus() throws Exception {
        DistributedLock lock = client.getLock("uninterruptible");
        CompletableFuture<Boolean> r = CompletableFuture.supplyAsync(() -> {
            Thread.currentThread().interrupt();
            lock.lock();
            boolean stillInterrupted = Thread.interrupted();
            lock.unlock();
            return stillInterrupted;
        });
        assertTrue(r.get(5, TimeUnit.SECONDS));
    }

    @Test
    void lockInterruptiblyOnAnInterruptedThreadThrowsAtOnce() throws Exception {
        DistributedLock lock = client.getLock("pre-interrupted");
        CompletableFuture<Boolean> r = CompletableFuture.supplyAsync(() -> {
            Thread.currentThread().interrupt();
            try {
                lock.lockInterruptibly();
                return false;
            } catch (InterruptedException e) {
                return true;
            }
        });
        assertTrue(r.get(5, TimeUnit.SECONDS));
        assertFalse(lock.isHeldByThisLock());
        assertEquals(0L, raw.num("EXISTS", key("pre-interrupted", "")));
    }

    @Test
    void notReentrantButNotStuck() throws Exception {
        DistributedLock lock = client.getLock("reentry");
        lock.lock();
        assertFalse(lock.tryLock(), "a second hold through the same object waits like anyone else");
        lock.unlock();
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
    }
}
