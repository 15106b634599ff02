package io.lockgate;

import static io.lockgate.TestUtil.eventually;
import static io.lockgate.TestUtil.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Interrupting a thread blocked in an acquisition cancels the wait and leaves nothing behind. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class InterruptTest extends RedisTestBase {
    interface Blocking {
        void run() throws InterruptedException;
    }

    private void interruptWhileWaiting(String name, DistributedLock waiterLock, Blocking wait) throws Exception {
        DistributedLock holder = client.getLock(name);
        holder.lock();
        CompletableFuture<Throwable> outcome = new CompletableFuture<>();
        AtomicBoolean waiterHolds = new AtomicBoolean();
        Thread t = new Thread(() -> {
            try {
                wait.run();
                outcome.complete(null);
            } catch (Throwable e) {
                waiterHolds.set(waiterLock.isHeldByCurrentThread());
                outcome.complete(e);
            }
        }, "blocked-waiter");
        t.start();
        assertTrue(eventually(5000, () -> raw.num("ZCARD", key(name, ":queue")) == 1), "the waiter is queued");
        long t0 = System.nanoTime();
        t.interrupt();
        Throwable e = outcome.get(5, TimeUnit.SECONDS);
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(e instanceof InterruptedException, "got " + e);
        assertTrue(ms < 1000, "the interrupt ended the wait promptly: " + ms + " ms");
        assertTrue(eventually(2000, () -> raw.num("ZCARD", key(name, ":queue")) == 0),
            "the queue entry was removed");
        assertFalse(waiterHolds.get(), "the interrupted thread holds nothing");
        // Releasing the holder grants nobody: the cancelled waiter left no trace.
        holder.unlock();
        Thread.sleep(100);
        assertEquals(0L, raw.num("EXISTS", key(name, "")), "no grant to the cancelled waiter");
        assertEquals(0L, raw.num("ZCARD", key(name, ":queue")));
        assertTrue(waiterLock.tryLock(), "the lock is free");
        waiterLock.unlock();
    }

    @Test
    void interruptingLockInterruptiblyCancelsTheWait() throws Exception {
        DistributedLock w = client.getLock("intr-lock");
        interruptWhileWaiting("intr-lock", w, w::lockInterruptibly);
    }

    @Test
    void interruptingTryLockWithTimeoutCancelsTheWait() throws Exception {
        DistributedLock w = client.getLock("intr-trylock");
        interruptWhileWaiting("intr-trylock", w, () -> w.tryLock(30, TimeUnit.SECONDS));
    }

    @Test
    void interruptingLeaseAcquireCancelsTheWait() throws Exception {
        DistributedLock w = client.getLock("intr-acquire");
        interruptWhileWaiting("intr-acquire", w, () -> w.acquire(Duration.ofSeconds(30)));
    }

    // Many interrupts racing with grants: every race ends either holding (then released) or
    // with InterruptedException and no lease left behind.
    @Test
    void interruptRacingWithGrantsLeaksNoLease() throws Exception {
        String name = "intr-race";
        DistributedLock holder = client.getLock(name);
        for (int i = 0; i < 30; i++) {
            holder.lock();
            DistributedLock w = client.getLock(name);
            Thread t = new Thread(() -> {
                try {
                    w.lockInterruptibly();
                    w.unlock();
                } catch (InterruptedException e) {
                    // expected for some rounds
                }
            });
            t.start();
            eventually(2000, () -> raw.num("ZCARD", key(name, ":queue")) == 1);
            holder.unlock();
            Thread.sleep(i % 3);
            t.interrupt();
            t.join(5000);
            assertFalse(t.isAlive());
        }
        assertTrue(eventually(3000, () -> raw.num("EXISTS", key(name, "")) == 0), "no lease leaked");
        assertEquals(0L, raw.num("ZCARD", key(name, ":queue")));
    }
}
