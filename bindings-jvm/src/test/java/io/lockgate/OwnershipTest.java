package io.lockgate;

import static io.lockgate.TestUtil.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * Issue 13, items 3 and 4 from Java: a handle never waits for itself (ALREADY_HELD), a thread
 * never waits for its own Lock-interface hold, and a lease nobody references is not released
 * by the garbage collector.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OwnershipTest extends RedisTestBase {
    private static void alreadyHeld(Executable call, String what) {
        long t0 = System.nanoTime();
        LockAlreadyHeldException e = assertThrows(LockAlreadyHeldException.class, call, what);
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(ms < 1000, what + ": failed at once, not after " + ms + " ms");
        assertEquals("ALREADY_HELD", e.code(), what);
        assertFalse(e.isRetryable(), what);
    }

    // A non-reentrant handle that holds a live lease: acquiring again through it fails at once
    // (it used to wait for itself forever), and the first lease is untouched.
    @Test
    void acquireThroughAHoldingHandleFailsFast() throws Exception {
        DistributedLock lock = client.getLock("own-handle");
        try (Lease first = lock.acquire(Duration.ofSeconds(1))) {
            alreadyHeld(() -> lock.acquire(Duration.ofSeconds(30)), "acquire(timeout)");
            alreadyHeld(lock::acquire, "acquire()");
            ExecutionException async = assertThrows(ExecutionException.class,
                () -> lock.acquireAsync(Duration.ofSeconds(30)).get(5, TimeUnit.SECONDS));
            assertTrue(async.getCause() instanceof LockAlreadyHeldException, String.valueOf(async.getCause()));
            assertTrue(first.isHeld());
            assertEquals(1L, raw.num("EXISTS", key("own-handle", "")));
        }
        try (Lease again = lock.acquire(Duration.ofSeconds(1))) {
            assertTrue(again.isHeld(), "after the release the handle acquires again");
        }
    }

    // The same rule for a second read lease through one non-reentrant read handle.
    @Test
    void secondReadLeaseThroughOneHandleFailsFast() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("own-read");
        try (Lease read = rw.readLock().acquire(Duration.ofSeconds(1))) {
            alreadyHeld(() -> rw.readLock().acquire(Duration.ofSeconds(30)), "second read lease");
            try (Lease other = client.getReadWriteLock("own-read").readLock().acquire(Duration.ofSeconds(1))) {
                assertTrue(other.isHeld(), "another handle shares the read lock");
            }
            assertTrue(read.isHeld());
        }
    }

    // A thread holding one half through the Lock interface that asks for the half that would
    // wait for it fails at once; other threads just wait.
    @Test
    void readWriteHalvesNeverWaitForTheirOwnThread() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("own-rw");
        rw.writeLock().lock();
        try {
            alreadyHeld(() -> rw.readLock().lock(), "read while this thread writes");
            alreadyHeld(() -> rw.readLock().acquire(Duration.ofSeconds(30)), "read lease while this thread writes");
            alreadyHeld(() -> rw.writeLock().acquire(Duration.ofSeconds(30)), "write lease while this thread writes");
            assertFalse(CompletableFuture.supplyAsync(() -> rw.readLock().tryLock()).get(5, TimeUnit.SECONDS),
                "another thread is an ordinary contender");
        } finally {
            rw.writeLock().unlock();
        }
        rw.readLock().lock();
        try {
            alreadyHeld(() -> rw.writeLock().lock(), "write while this thread reads (no upgrade)");
            try (Lease otherRead = rw.readLock().acquire(Duration.ofSeconds(1))) {
                assertTrue(otherRead.isHeld(), "a read lease beside this thread's read hold does not wait");
            }
        } finally {
            rw.readLock().unlock();
        }
        assertEquals(0L, raw.num("EXISTS", key("own-rw", ":rw:holders")));
    }

    // Item 4: a lease whose result was ignored (the redis-py habit) must not be released by the
    // garbage collector while the caller still runs the critical section; it stays held until
    // its client is closed.
    @Test
    void aDroppedLeaseIsNotReleasedByTheGarbageCollector() throws Exception {
        try (LockgateClient own = LockgateClient.connect(server.url())) {
            WeakReference<Lease> ref = new WeakReference<>(own.getLock("own-gc").acquire(Duration.ofSeconds(1)));
            for (int i = 0; i < 5; i++) {
                System.gc();
                Thread.sleep(100);
            }
            assertEquals(1L, raw.num("EXISTS", key("own-gc", "")), "still held after garbage collection");
            assertTrue(ref.get() != null, "the client keeps the unreleased lease");
            assertTrue(client.getLock("own-gc").tryAcquire().isEmpty());
            Lease l = ref.get();
            assertTrue(l.isHeld());
            assertTrue(l.release());
            l = null;
            assertEquals(0L, raw.num("EXISTS", key("own-gc", "")));
            own.getLock("own-gc").acquire(Duration.ofSeconds(1)); // dropped again: the close releases it
        }
        assertEquals(0L, raw.num("EXISTS", key("own-gc", "")), "closing the client released it");
    }
}
