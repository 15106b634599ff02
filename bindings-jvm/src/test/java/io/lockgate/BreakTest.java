package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Breaking a lock from Java (issue 25): {@link LockgateClient#breakLock} — what it returns, the
 * next waiter woken with a larger token, the broken holder's loss and release, a stale token, bad
 * input — and the README migration row for Redisson's {@code forceUnlock()}. The cross-language and
 * per-backend cases are the conformance scenarios break_*.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BreakTest extends RedisTestBase {
    @Test
    void aBreakWakesTheNextWaiterAndTheBrokenHolderLearnsOfItsLoss() throws Exception {
        try (LockgateClient holderClient = LockgateClient.connect(server.url(), ClientOptions.builder().label("jvm-brk-a").build())) {
            Lease held = holderClient.getLock("jobs", LockOptions.renewedLease(Duration.ofMillis(900))).acquire(Duration.ofSeconds(5));
            CompletableFuture<Lease> next = client.getLock("jobs").acquireAsync(Duration.ofSeconds(5));
            Thread.sleep(200);
            BrokenHolder broken = client.breakLock("jobs").orElseThrow();
            assertEquals(Optional.of("jvm-brk-a"), broken.label());
            assertEquals(held.fencingToken(), broken.fencingToken());
            Lease granted = next.get(5, TimeUnit.SECONDS);
            assertTrue(granted.fencingToken().getAsLong() > held.fencingToken().getAsLong());
            held.lost().get(5, TimeUnit.SECONDS);
            assertFalse(held.release(), "the broken holder's release finds nothing");
            assertTrue(granted.release(), "and did not touch the new holder");
            assertEquals(Optional.empty(), client.breakLock("jobs"));
        }
    }

    @Test
    void aStaleTokenBreaksNothingAndForceUnlockBreaksTheHolder() throws Exception {
        DistributedLock lock = client.getLock("stale");
        Lease first = lock.acquire(Duration.ofSeconds(5));
        assertTrue(first.release());
        Lease second = lock.acquire(Duration.ofSeconds(5));
        assertEquals(Optional.empty(), client.breakLock("stale", first.fencingToken().getAsLong()));
        assertTrue(lock.isLocked());
        // Redisson's lock.forceUnlock(): break whoever holds it.
        assertEquals(second.fencingToken(), client.breakLock("stale").orElseThrow().fencingToken());
        assertFalse(lock.isLocked());
        assertFalse(second.release());
        assertThrows(LockInvalidArgumentException.class, () -> client.breakLock(""));
        assertThrows(LockInvalidArgumentException.class, () -> client.breakLock("x", -1));
        assertThrows(LockInvalidArgumentException.class, () -> client.breakLock("x", "table", null));
    }
}
