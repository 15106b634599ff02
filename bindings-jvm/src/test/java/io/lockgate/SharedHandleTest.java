package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 23, item 3 from Java: one {@link DistributedLock} shared by threads through its lease
 * API lets each thread wait its turn (no overlap, fencing tokens increasing), while the thread
 * that holds it still gets {@link LockAlreadyHeldException} at once, saying it was this thread.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SharedHandleTest extends RedisTestBase {
    private static final int THREADS = 20;

    @Test
    void threadsSharingOneHandleEachGetTheirTurn() throws Exception {
        DistributedLock lock = client.getLock("shared-threads");
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        List<Long> tokens = new ArrayList<>();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < THREADS; i++) {
            threads.add(new Thread(() -> {
                try (Lease lease = lock.acquire(Duration.ofSeconds(60))) {
                    if (inside.incrementAndGet() > 1) overlaps.incrementAndGet();
                    synchronized (tokens) {
                        tokens.add(lease.fencingToken().getAsLong());
                    }
                    Thread.sleep(5);
                    inside.decrementAndGet();
                } catch (Throwable t) {
                    errors.add(t);
                }
            }));
        }
        threads.forEach(Thread::start);
        for (Thread t : threads) t.join(90_000);
        assertTrue(errors.isEmpty(), "every thread waits its turn: " + errors);
        assertEquals(0, overlaps.get(), "two threads held it at once");
        assertEquals(THREADS, tokens.size());
        for (int i = 1; i < tokens.size(); i++) {
            assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens increase: " + tokens);
        }
    }

    @Test
    void theHoldingThreadFailsAtOnceWhileAnotherWaits() throws Exception {
        DistributedLock lock = client.getLock("shared-self");
        Lease first = lock.acquire(Duration.ofSeconds(5));
        long t0 = System.nanoTime();
        LockAlreadyHeldException e =
            assertThrows(LockAlreadyHeldException.class, () -> lock.acquire(Duration.ofSeconds(30)));
        assertTrue((System.nanoTime() - t0) / 1_000_000 < 1000, "failed at once");
        assertEquals("ALREADY_HELD", e.code());
        assertTrue(e.getMessage().contains("this thread already holds"), e.getMessage());
        assertTrue(e.getMessage().contains("wait for itself"), e.getMessage());

        CompletableFuture<Lease> other = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                other.complete(lock.acquire(Duration.ofSeconds(20)));
            } catch (Throwable x) {
                other.completeExceptionally(x);
            }
        });
        t.start();
        Thread.sleep(300);
        assertFalse(other.isDone(), "another thread waits its turn instead of failing");
        first.release();
        try (Lease second = other.get(10, TimeUnit.SECONDS)) {
            assertTrue(second.fencingToken().getAsLong() > first.fencingToken().getAsLong());
        }
    }
}
