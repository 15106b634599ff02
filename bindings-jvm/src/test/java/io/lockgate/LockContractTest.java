package io.lockgate;

import static io.lockgate.TestUtil.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** java.util.concurrent.locks.Lock behaviours, with the thread as owner (issue 13, item 2). */
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

    // Ownership is the thread, as for ReentrantLock: unlock() from a thread that does not hold
    // it throws IllegalMonitorStateException and leaves the owner's hold alone.
    @Test
    void nonOwnerUnlockIsIllegalMonitorState() throws Exception {
        DistributedLock lock = client.getLock("handover");
        lock.lock();
        assertTrue(lock.isHeldByCurrentThread());
        CompletableFuture<Throwable> other = CompletableFuture.supplyAsync(() -> {
            try {
                lock.unlock();
                return null;
            } catch (Throwable t) {
                return t;
            }
        });
        Throwable t = other.get(5, TimeUnit.SECONDS);
        assertTrue(t instanceof IllegalMonitorStateException, "got " + t);
        assertTrue(t.getMessage().contains("not held by the current thread"), t.getMessage());
        assertFalse(CompletableFuture.supplyAsync(lock::isHeldByCurrentThread).get(5, TimeUnit.SECONDS));
        assertTrue(lock.isHeldByCurrentThread(), "the owner still holds it");
        assertEquals(1L, raw.num("EXISTS", key("handover", "")));
        lock.unlock();
        assertFalse(lock.isHeldByCurrentThread());
        assertEquals(0L, raw.num("EXISTS", key("handover", "")));
    }

    // Redisson's idiom: lock() through one getLock(name) object, unlock() through a fresh one on
    // the same thread (the thread's holds live in the client, keyed by name).
    @Test
    void unlockThroughAFreshLockObjectOfTheSameName() throws Exception {
        client.getLock("fresh-unlock").lock();
        DistributedLock fresh = client.getLock("fresh-unlock");
        assertTrue(fresh.isHeldByCurrentThread());
        assertEquals(1, fresh.getHoldCount());
        fresh.unlock();
        assertEquals(0L, raw.num("EXISTS", key("fresh-unlock", "")), "released on the server");
        assertEquals(0, client.getLock("fresh-unlock").getHoldCount());
        assertThrows(IllegalMonitorStateException.class, () -> client.getLock("fresh-unlock").unlock());
        // The same through a reentrant object: two holds, given back through two other objects.
        LockOptions re = LockOptions.builder().reentrant(true).build();
        client.getLock("fresh-unlock", re).lock();
        client.getLock("fresh-unlock", re).lock();
        assertEquals(2, client.getLock("fresh-unlock").getHoldCount());
        client.getLock("fresh-unlock").unlock();
        assertEquals(1L, raw.num("EXISTS", key("fresh-unlock", "")), "one hold left");
        client.getLock("fresh-unlock", re).unlock();
        assertEquals(0L, raw.num("EXISTS", key("fresh-unlock", "")));
    }

    // Each thread's hold goes through a handle of its own, reused by a later hold once unlocked
    // (IdleHandles): turns of several threads through one object stay exclusive, every unlock
    // releases on the server, and every grant's token is larger than the one before, whichever
    // thread's hold the handle served last.
    @Test
    void reusedHandlesKeepEveryHoldItsOwn() throws Exception {
        DistributedLock lock = client.getLock("turns");
        ExecutorService threads = Executors.newFixedThreadPool(3);
        try {
            long last = 0;
            for (int i = 0; i < 12; i++) {
                long token = threads.submit(() -> {
                    lock.lock();
                    try {
                        assertEquals(1, lock.getHoldCount());
                        return lock.currentLease().orElseThrow().fencingToken().getAsLong();
                    } finally {
                        lock.unlock();
                    }
                }).get(10, TimeUnit.SECONDS);
                assertTrue(token > last, "turn " + i + ": " + token + " > " + last);
                last = token;
                assertEquals(0L, raw.num("EXISTS", key("turns", "")), "turn " + i + " released on the server");
            }
            AtomicInteger inside = new AtomicInteger();
            List<Future<Integer>> workers = new ArrayList<>();
            for (int w = 0; w < 3; w++) {
                workers.add(threads.submit(() -> {
                    int most = 0;
                    for (int i = 0; i < 8; i++) {
                        lock.lock();
                        try {
                            most = Math.max(most, inside.incrementAndGet());
                            Thread.sleep(2);
                            inside.decrementAndGet();
                        } finally {
                            lock.unlock();
                        }
                    }
                    return most;
                }));
            }
            for (Future<Integer> f : workers) {
                assertEquals(1, f.get(30, TimeUnit.SECONDS), "one holder at a time");
            }
            assertEquals(0L, raw.num("EXISTS", key("turns", "")));
        } finally {
            threads.shutdown();
        }
    }

    /** Runs {@code call} on another thread (the Lock interface is owned per thread). */
    private static <T> T onOtherThread(Callable<T> call) throws Exception {
        ExecutorService other = Executors.newSingleThreadExecutor();
        try {
            return other.submit(call).get(10, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception) {
                throw (Exception) e.getCause();
            }
            throw e;
        } finally {
            other.shutdown();
        }
    }

    @Test
    void tryLockVariants() throws Exception {
        DistributedLock a = client.getLock("try");
        DistributedLock b = client.getLock("try");
        assertTrue(a.tryLock());
        assertFalse((boolean) onOtherThread(b::tryLock), "held by another thread");
        long tookMs = onOtherThread(() -> {
            long t0 = System.nanoTime();
            assertFalse(b.tryLock(150, TimeUnit.MILLISECONDS));
            return (System.nanoTime() - t0) / 1_000_000;
        });
        assertTrue(tookMs >= 140 && tookMs < 2000, "waited about the timeout: " + tookMs + " ms");
        assertFalse((boolean) onOtherThread(() -> b.tryLock(0, TimeUnit.SECONDS)), "zero: one attempt, no exception");
        assertFalse((boolean) onOtherThread(() -> b.tryLock(-5, TimeUnit.SECONDS)), "negative: one attempt, no exception");
        assertThrows(IllegalMonitorStateException.class, () -> onOtherThread(() -> {
            b.unlock();
            return null;
        }));
        a.unlock();
        assertTrue((boolean) onOtherThread(() -> {
            boolean got = b.tryLock(1, TimeUnit.SECONDS);
            b.unlock();
            return got;
        }));
    }

    // A waiter blocked in lock() gets the lock when the holder unlocks.
    @Test
    void lockWaitsForUnlock() throws Exception {
        DistributedLock a = client.getLock("wait");
        DistributedLock b = client.getLock("wait");
        a.lock();
        CompletableFuture<Long> waiter = CompletableFuture.supplyAsync(() -> {
            b.lock();
            long token = b.currentLease().orElseThrow().fencingToken().getAsLong();
            b.unlock();
            return token;
        });
        Thread.sleep(150);
        assertFalse(waiter.isDone());
        long first = a.currentLease().orElseThrow().fencingToken().getAsLong();
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
        LockTimeoutException e = assertThrows(LockTimeoutException.class, () -> onOtherThread(() -> {
            limited.lock();
            return null;
        }));
        assertEquals("TIMEOUT", e.code());
        assertTrue(e.isRetryable());
        assertThrows(LockTimeoutException.class, () -> onOtherThread(limited::acquire));
        holder.unlock();
    }

    // unlock() after the lease was lost: IllegalMonitorStateException, with the reason as cause.
    @Test
    void unlockAfterLossIsIllegalMonitorStateWithCause() throws Exception {
        DistributedLock lock = client.getLock("lost-unlock", LockOptions.fixedLease(Duration.ofMillis(100)));
        lock.lock();
        Thread.sleep(250);
        assertFalse(lock.isHeldByCurrentThread(), "the lease is gone");
        assertEquals(1, lock.getHoldCount(), "but the thread has not unlocked yet");
        LockNotHeldException again = assertThrows(LockNotHeldException.class, lock::lock,
            "re-entering a lost hold is loud");
        assertTrue(again.getMessage().contains("unlock() it first"), again.getMessage());
        IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertTrue(e.getCause() instanceof LockNotHeldException, String.valueOf(e.getCause()));
        assertEquals(0, lock.getHoldCount());
        assertTrue(lock.tryLock(), "free again");
        lock.unlock();
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
        assertFalse(lock.isHeldByCurrentThread());
        assertEquals(0L, raw.num("EXISTS", key("pre-interrupted", "")));
    }

    // Built without reentrant(true), a second lock() by the holding thread fails at once with
    // ALREADY_HELD (what the Lock contract allows for "an invocation that would cause deadlock")
    // instead of waiting for itself forever; the first hold is untouched.
    @Test
    void notReentrantFailsFastOnTheHoldingThread() throws Exception {
        DistributedLock lock = client.getLock("reentry");
        lock.lock();
        long t0 = System.nanoTime();
        LockAlreadyHeldException e = assertThrows(LockAlreadyHeldException.class, lock::lock);
        assertTrue((System.nanoTime() - t0) / 1_000_000 < 500, "at once");
        assertEquals("ALREADY_HELD", e.code());
        assertFalse(e.isRetryable());
        assertThrows(LockAlreadyHeldException.class, lock::tryLock);
        assertThrows(LockAlreadyHeldException.class, () -> lock.tryLock(1, TimeUnit.SECONDS));
        assertThrows(LockAlreadyHeldException.class, lock::lockInterruptibly);
        assertThrows(LockAlreadyHeldException.class, () -> client.getLock("reentry").lock(), "any object of the name");
        // A blocking lease acquisition would wait for this thread's hold too.
        assertThrows(LockAlreadyHeldException.class, () -> lock.acquire(Duration.ofSeconds(5)));
        assertEquals(1, lock.getHoldCount());
        assertTrue(lock.isHeldByCurrentThread());
        // Another thread is an ordinary contender: it waits (here: times out), it does not fail.
        assertFalse(CompletableFuture.supplyAsync(() -> {
            try {
                return lock.tryLock(100, TimeUnit.MILLISECONDS);
            } catch (InterruptedException ie) {
                throw new IllegalStateException(ie);
            }
        }).get(5, TimeUnit.SECONDS));
        lock.unlock();
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertEquals(0L, raw.num("EXISTS", key("reentry", "")));
    }
}
