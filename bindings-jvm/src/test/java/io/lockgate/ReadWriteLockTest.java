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
    // Through java.util.concurrent.locks: threads sharing one object; a writer never overlaps anyone.
    @Test
    void jdkInterfaceNeverLetsAWriterOverlap() throws Exception {
        DistributedReadWriteLock rw = client.getReadWriteLock("stress");
        assertSame(rw.readLock(), rw.readLock(), "each half is one object");
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
