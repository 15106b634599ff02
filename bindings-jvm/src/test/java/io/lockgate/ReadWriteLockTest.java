package io.lockgate;

import static io.lockgate.TestUtil.key;
import static io.lockgate.TestUtil.liveKeys;
import static io.lockgate.TestUtil.zcardAtLeast;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
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
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** DistributedReadWriteLock: shared readers, exclusive writers, writers first, the JDK interface. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ReadWriteLockTest extends RedisTestBase {
    @Test
    void readersOverlapAndAWriterExcludesEveryone() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("doc");
        assertSame(rw.readLock(), rw.readLock());
        try (LockgateClient other = LockgateClient.connect(server.url())) {
            DistributedReadWriteLock rw2 = other.getReadWriteLock("doc");
            Lease r1 = rw.readLock().acquire(Duration.ofSeconds(1));
            Lease r2 = rw2.readLock().acquire(Duration.ofSeconds(1));
            assertEquals(2L, raw.num("ZCARD", key("doc", ":rw:holders")), "two readers at once");
            assertTrue(rw2.writeLock().tryAcquire().isEmpty(), "no writer beside readers");
            assertThrows(LockTimeoutException.class, () -> rw.writeLock().acquire(Duration.ofMillis(100)));
            assertTrue(r1.release());
            assertTrue(rw2.writeLock().tryAcquire().isEmpty(), "no writer beside one reader");
            assertTrue(r2.release());
            try (Lease w = rw2.writeLock().acquire(Duration.ofSeconds(1))) {
                assertTrue(w.fencingToken().getAsLong() > r2.fencingToken().getAsLong());
                assertTrue(rw.readLock().tryAcquire().isEmpty(), "no reader beside a writer");
                assertTrue(rw.writeLock().tryAcquire().isEmpty(), "no second writer");
            }
        }
        assertEquals(List.of(), liveKeys(raw, "doc"));
    }

    // A queued writer blocks readers that arrive after it (writers first, the default).
    @Test
    void aQueuedWriterBlocksNewReaders() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("queued");
        assertTrue(rw.isWritersFirst());
        Lease r1 = rw.readLock().acquire(Duration.ofSeconds(1));
        CompletableFuture<Lease> writer = rw.writeLock().acquireAsync(Duration.ofSeconds(10));
        assertTrue(zcardAtLeast(raw, key("queued", ":rw:queue"), 1, 5000), "the writer queued");
        // Another reader (a second handle: this one already holds r1 and would be ALREADY_HELD).
        assertTrue(client.getReadWriteLock("queued").readLock().tryAcquire().isEmpty(),
            "a queued writer blocks a new reader");
        // Every client of a name must agree on writers-first while it is in use (issue 13, item 1).
        LockInvalidArgumentException mismatch = assertThrows(LockInvalidArgumentException.class,
            () -> rw.withWritersFirst(false).readLock().tryAcquire());
        assertTrue(mismatch.getMessage().contains("writers_first"), mismatch.getMessage());
        assertTrue(r1.release());
        Lease w = writer.get(5, TimeUnit.SECONDS);
        assertTrue(w.fencingToken().getAsLong() > r1.fencingToken().getAsLong());
        assertTrue(client.getReadWriteLock("queued").readLock().tryAcquire().isEmpty());
        w.close();
        assertEquals(List.of(), liveKeys(raw, "queued"));
    }

    // Through java.util.concurrent.locks: threads sharing one object; a writer never overlaps anyone.
    @Test
    void jdkInterfaceNeverLetsAWriterOverlap() throws Exception {
        ReadWriteLock rw = client.getReadWriteLock("stress");
        AtomicInteger readers = new AtomicInteger();
        AtomicInteger writers = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger maxReaders = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(6);
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            int id = t;
            fs.add(pool.submit(() -> {
                for (int n = 0; n < 20; n++) {
                    boolean write = (id + n) % 4 == 0;
                    Lock l = write ? rw.writeLock() : rw.readLock();
                    l.lock();
                    try {
                        if (write) {
                            if (writers.incrementAndGet() > 1 || readers.get() > 0) {
                                overlaps.incrementAndGet();
                            }
                            Thread.sleep(1);
                            writers.decrementAndGet();
                        } else {
                            maxReaders.accumulateAndGet(readers.incrementAndGet(), Math::max);
                            if (writers.get() > 0) {
                                overlaps.incrementAndGet();
                            }
                            Thread.sleep(2);
                            readers.decrementAndGet();
                        }
                    } finally {
                        l.unlock();
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : fs) {
            f.get();
        }
        pool.shutdown();
        assertEquals(0, overlaps.get(), "a writer overlapped another holder");
        assertTrue(maxReaders.get() >= 2, "readers shared the lock: " + maxReaders.get());
        assertEquals(0, ((DistributedLock) rw.readLock()).getHoldCount());
        assertEquals(List.of(), liveKeys(raw, "stress"));
    }

    @Test
    void timeoutsLeaveNoKeys() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("rw-timeout");
        Lease w = rw.writeLock().acquire(Duration.ofSeconds(1));
        assertThrows(LockTimeoutException.class, () -> rw.readLock().acquire(Duration.ofMillis(100)));
        assertFalse(rw.readLock().tryLock(50, TimeUnit.MILLISECONDS));
        assertTrue(TestUtil.eventually(1000, () -> raw.num("ZCARD", key("rw-timeout", ":rw:queue")) == 0),
            "timed-out readers left the queue");
        assertTrue(w.release());
        assertEquals(List.of(), liveKeys(raw, "rw-timeout"));
        assertThrows(LockInvalidArgumentException.class, () -> client.getReadWriteLock(""));
        assertThrows(LockInvalidArgumentException.class,
            () -> client.getReadWriteLock("x", LockOptions.fixedLease(Duration.ZERO)));
    }
}
