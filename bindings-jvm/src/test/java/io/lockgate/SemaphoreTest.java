package io.lockgate;

import static io.lockgate.TestUtil.key;
import static io.lockgate.TestUtil.liveKeys;
import static io.lockgate.TestUtil.zcardAtLeast;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** DistributedSemaphore: the permit cap, permits of dead holders, timeouts, bad input. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SemaphoreTest extends RedisTestBase {
    // Eight threads on two clients take 3 permits 160 times: never more than 3 inside at once.
    @Test
    void capsConcurrentHolders() throws Exception {
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger peak = new AtomicInteger();
        List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
        try (LockgateClient second = LockgateClient.connect(server.url())) {
            ExecutorService pool = Executors.newFixedThreadPool(8);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                // One object per holder: an object holds one permit at a time.
                DistributedSemaphore sem = (t % 2 == 0 ? client : second).getSemaphore("cap", 3);
                fs.add(pool.submit(() -> {
                    for (int i = 0; i < 20; i++) {
                        try (Lease permit = sem.acquire(Duration.ofSeconds(30))) {
                            tokens.add(permit.fencingToken().getAsLong());
                            peak.accumulateAndGet(inside.incrementAndGet(), Math::max);
                            Thread.sleep(2);
                            inside.decrementAndGet();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
            pool.shutdown();
        }
        assertTrue(peak.get() <= 3, "at most 3 holders at once, saw " + peak.get());
        assertTrue(peak.get() >= 2, "permits were shared, peak " + peak.get());
        assertEquals(160, new HashSet<>(tokens).size(), "every permit has its own fencing token");
        assertEquals(List.of(), liveKeys(raw, "cap"));
    }

    // A permit with a fixed lease that is never released frees itself; the waiter gets it.
    @Test
    void anAbandonedFixedLeasePermitReturns() throws Exception {
        DistributedSemaphore sem = client.getSemaphore("abandoned", 1, LockOptions.fixedLease(Duration.ofMillis(300)));
        Lease abandoned = sem.acquire(Duration.ofSeconds(1));
        long t0 = System.nanoTime();
        DistributedSemaphore waiter = client.getSemaphore("abandoned", 1, LockOptions.fixedLease(Duration.ofMillis(300)));
        try (Lease next = waiter.acquire(Duration.ofSeconds(5))) {
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 200 && ms < 2000, "granted once the lease ran out: " + ms + " ms");
            assertTrue(next.fencingToken().getAsLong() > abandoned.fencingToken().getAsLong());
            assertFalse(abandoned.isHeld());
        }
        assertThrows(LockNotHeldException.class, abandoned::close, "closing the expired permit is loud");
        assertEquals(List.of(), liveKeys(raw, "abandoned"));
    }

    // Timed-out and cancelled waits leave no queue entry; the last release leaves only the fence.
    @Test
    void timeoutsAndCancellationLeaveNoKeys() throws Exception {
        Lease held = client.getSemaphore("timeouts", 1).acquire(Duration.ofSeconds(1));
        DistributedSemaphore sem = client.getSemaphore("timeouts", 1);
        long t0 = System.nanoTime();
        LockTimeoutException e = assertThrows(LockTimeoutException.class, () -> sem.acquire(Duration.ofMillis(200)));
        assertTrue((System.nanoTime() - t0) / 1_000_000 >= 190);
        assertTrue(e.isRetryable());
        assertEquals(Optional.empty(), sem.tryAcquire(Duration.ofMillis(100)));
        assertEquals(Optional.empty(), sem.tryAcquire());
        CompletableFuture<Lease> waiting = sem.acquireAsync(Duration.ofSeconds(30));
        assertTrue(zcardAtLeast(raw, key("timeouts", ":sem:queue"), 1, 5000), "the async waiter queued");
        waiting.cancel(true);
        assertTrue(TestUtil.eventually(2000, () -> raw.num("ZCARD", key("timeouts", ":sem:queue")) == 0),
            "the cancelled waiter left the queue");
        assertTrue(held.release());
        assertEquals(List.of(), liveKeys(raw, "timeouts"));
    }

    @Test
    void asyncVariantsAndLeaseApi() throws Exception {
        DistributedSemaphore sem = client.getSemaphore("async", 2);
        assertEquals(2, sem.permits());
        assertEquals("async", sem.getName());
        Lease a = sem.acquireAsync(Duration.ofSeconds(1)).get(5, TimeUnit.SECONDS);
        // One object holds one permit at a time: a second acquire through it fails at once, even
        // with a permit free, and takes nothing.
        LockAlreadyHeldException self =
            assertThrows(LockAlreadyHeldException.class, () -> sem.acquire(Duration.ofSeconds(30)));
        assertEquals("ALREADY_HELD", self.code());
        assertEquals(1L, raw.num("ZCARD", key("async", ":sem:holders")));
        Lease b = client.getSemaphore("async", 2).tryAcquireAsync().get(5, TimeUnit.SECONDS).orElseThrow();
        assertTrue(client.getSemaphore("async", 2).tryAcquireAsync().get(5, TimeUnit.SECONDS).isEmpty(),
            "both permits taken");
        assertEquals(2L, raw.num("ZCARD", key("async", ":sem:holders")));
        b.extend(Duration.ofSeconds(10));
        assertTrue(a.releaseAsync().get(5, TimeUnit.SECONDS));
        try (Lease c = sem.acquire(Duration.ofSeconds(1))) {
            assertTrue(c.fencingToken().getAsLong() > b.fencingToken().getAsLong());
        }
        b.close();
        assertEquals(List.of(), liveKeys(raw, "async"));
    }

    // Bad counts and options are the typed INVALID_ARGUMENT, before any network call.
    @Test
    void badInputIsInvalidArgument() {
        for (int permits : new int[] {0, -1, 1_000_001}) {
            LockInvalidArgumentException e =
                assertThrows(LockInvalidArgumentException.class, () -> client.getSemaphore("bad", permits));
            assertEquals("INVALID_ARGUMENT", e.code());
            assertFalse(e.isRetryable());
        }
        assertThrows(LockInvalidArgumentException.class, () -> client.getSemaphore("", 1));
        assertThrows(LockInvalidArgumentException.class,
            () -> client.getSemaphore("bad", 2, LockOptions.builder().reentrant(true).build()),
            "semaphores are never reentrant");
        assertEquals(List.of(), liveKeys(raw, "bad"));
        assertEquals(0L, raw.num("EXISTS", key("bad", ":sem:fence")));
    }
}
