package io.lockgate;

import static io.lockgate.TestUtil.eventually;
import static io.lockgate.TestUtil.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The lease API: owner-only release, expiry, extend, renewal, loss, async variants. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LeaseTest extends RedisTestBase {
    // A fixed lease frees itself; extend afterwards never re-creates the key.
    @Test
    void expiryFreesAndExtendNeverResurrects() throws Exception {
        DistributedLock lock = client.getLock("exp", LockOptions.fixedLease(Duration.ofMillis(150)));
        Lease lease = lock.acquire(Duration.ofSeconds(1));
        assertTrue(client.getLock("exp").tryAcquire().isEmpty(), "held while the lease runs (another handle)");
        Thread.sleep(300);
        assertFalse(lease.isHeld());
        assertTrue(lease.remaining().isEmpty());
        LockNotHeldException e = assertThrows(LockNotHeldException.class, () -> lease.extend(Duration.ofSeconds(5)));
        assertEquals("NOT_HELD", e.code());
        assertFalse(e.isRetryable());
        assertEquals(0L, raw.num("EXISTS", key("exp", "")), "extend must not re-create the key");
        try (Lease again = lock.tryAcquire().orElseThrow()) {
            assertTrue(again.fencingToken().getAsLong() > lease.fencingToken().getAsLong());
        }
        // Closing the expired lease says it was not held, loudly.
        assertThrows(LockNotHeldException.class, lease::close);
    }

    // minHold: a release keeps the lock on the server until then; maxHold: the lease ends then
    // (lost, the next waiter gets it); bad holds name the option in seconds.
    @Test
    void minHoldOutlivesTheReleaseAndMaxHoldEndsTheLease() throws Exception {
        long granted = System.nanoTime();
        Lease lease = client.getLock("jhold", LockOptions.builder().minHold(Duration.ofMillis(500)).build()).acquire(Duration.ofSeconds(1));
        assertTrue(lease.release());
        assertTrue(client.getLock("jhold").tryAcquire().isEmpty(), "held on the server until minHold");
        try (Lease late = client.getLock("jhold").acquire(Duration.ofSeconds(5))) {
            assertTrue(System.nanoTime() - granted >= 500_000_000L);
            assertTrue(late.fencingToken().getAsLong() > lease.fencingToken().getAsLong());
        }
        LockOptions capped = LockOptions.builder().lease(Duration.ofMillis(300)).autoRenew(true).maxHold(Duration.ofMillis(500)).build();
        Lease first = client.getLock("jmax", capped).acquire(Duration.ofSeconds(1));
        try (Lease next = client.getLock("jmax").acquire(Duration.ofSeconds(5))) {
            assertFalse(first.isHeld());
            assertTrue(first.lostReason().orElseThrow().getMessage().contains("max_hold"), String.valueOf(first.lostReason()));
        }
        LockInvalidArgumentException e = assertThrows(LockInvalidArgumentException.class,
            () -> client.getLock("jbad", LockOptions.builder().minHold(Duration.ofSeconds(2)).maxHold(Duration.ofSeconds(1)).build()));
        assertEquals("minHold (2 s) must not be longer than maxHold (1 s)", e.getMessage());
    }

    // Deleting the key behind the holder's back: the loss future completes, listeners run.
    @Test
    void lossIsSignalledWhenTheKeyIsDeleted() throws Exception {
        DistributedLock lock = client.getLock("gone", LockOptions.renewedLease(Duration.ofMillis(600)));
        Lease lease = lock.acquire(Duration.ofSeconds(1));
        CompletableFuture<Void> lost = lease.lost();
        AtomicReference<LockException> seen = new AtomicReference<>();
        lease.onLost(seen::set);
        assertFalse(lost.isDone());
        assertEquals(1L, raw.num("DEL", key("gone", "")));
        lost.get(3, TimeUnit.SECONDS);
        assertTrue(eventually(1000, () -> seen.get() != null), "listener ran");
        assertTrue(seen.get() instanceof LockNotHeldException, String.valueOf(seen.get()));
        assertFalse(lease.isHeld());
        assertTrue(lease.lostReason().isPresent());
        // A listener added after the loss runs at once.
        AtomicReference<LockException> late = new AtomicReference<>();
        lease.onLost(late::set);
        assertNotNull(late.get());
        assertThrows(LockNotHeldException.class, lease::close);
        // Still answers after close: the reason is kept, listeners still learn of the loss.
        assertTrue(lease.lostReason().isPresent());
        AtomicReference<LockException> afterClose = new AtomicReference<>();
        lease.onLost(afterClose::set);
        assertNotNull(afterClose.get());
        lease.close(); // idempotent, no second throw
    }

    // A listener runs on a thread of the native runtime; the Lock interface's blocking calls made
    // there (each one native call that waits in place) still complete.
    @Test
    void aLossListenerCanLockAndUnlock() throws Exception {
        Lease lease = client.getLock("gone-relock", LockOptions.renewedLease(Duration.ofMillis(600))).acquire(Duration.ofSeconds(1));
        DistributedLock other = client.getLock("from-listener");
        CompletableFuture<Boolean> done = new CompletableFuture<>();
        lease.onLost(reason -> {
            try {
                other.lock();
                boolean held = other.isHeldByCurrentThread();
                other.unlock();
                done.complete(held);
            } catch (Throwable t) {
                done.completeExceptionally(t);
            }
        });
        assertEquals(1L, raw.num("DEL", key("gone-relock", "")));
        assertTrue(done.get(5, TimeUnit.SECONDS), "held by the listener's thread between lock() and unlock()");
        assertEquals(0L, raw.num("EXISTS", key("from-listener", "")), "released by unlock()");
        assertThrows(LockNotHeldException.class, lease::close);
    }

    @Test
    void aClosedLeaseIsDefinitelyNotHeld() throws Exception {
        Lease lease = client.getLock("closed-lease").acquire(Duration.ofSeconds(1));
        lease.close();
        assertFalse(lease.isHeld());
        assertTrue(lease.remaining().isEmpty());
        assertTrue(lease.lostReason().isEmpty(), "a normal release is not a loss");
        assertFalse(lease.release());
        assertThrows(LockNotHeldException.class, () -> lease.extend(Duration.ofSeconds(1)));
        assertEquals(0L, raw.num("EXISTS", key("closed-lease", "")));
    }

    // A normal release never fires the loss signal.
    @Test
    void releaseDoesNotSignalLoss() throws Exception {
        Lease lease = client.getLock("calm").acquire(Duration.ofSeconds(1));
        CompletableFuture<Void> lost = lease.lost();
        lease.close();
        Thread.sleep(200);
        assertFalse(lost.isDone());
        assertTrue(lease.lostReason().isEmpty());
        lease.close(); // idempotent
    }

    @Test
    void asyncVariants() throws Exception {
        DistributedLock lock = client.getLock("async");
        DistributedLock other = client.getLock("async"); // a second handle: contenders
        Lease lease = lock.acquireAsync(Duration.ofSeconds(1)).get(5, TimeUnit.SECONDS);
        assertTrue(lease.isHeld());
        lease.extendAsync(Duration.ofSeconds(60)).get(5, TimeUnit.SECONDS);
        assertTrue(lease.remaining().orElseThrow().compareTo(Duration.ofSeconds(40)) > 0, "extended past the 30 s default");
        Optional<Lease> none = other.tryAcquireAsync().get(5, TimeUnit.SECONDS);
        assertTrue(none.isEmpty());
        CompletableFuture<Lease> waiting = other.acquireAsync(Duration.ofSeconds(10));
        Thread.sleep(100);
        assertFalse(waiting.isDone());
        assertTrue(lease.releaseAsync().get(5, TimeUnit.SECONDS));
        Lease next = waiting.get(5, TimeUnit.SECONDS);
        assertTrue(next.fencingToken().getAsLong() > lease.fencingToken().getAsLong());
        LockTimeoutException t = assertThrows(LockTimeoutException.class, () -> {
            try {
                lock.acquireAsync(Duration.ofMillis(100)).join();
            } catch (java.util.concurrent.CompletionException e) {
                throw e.getCause();
            }
        });
        assertTrue(t.isRetryable());
        next.close();
        LockgateClient c2 = LockgateClient.connectAsync(server.url()).get(5, TimeUnit.SECONDS);
        c2.closeAsync().get(5, TimeUnit.SECONDS);
    }

    // Cancelling a pending acquireAsync removes the waiter from the server and leaks no lease.
    @Test
    void cancellingAnAsyncAcquireLeavesNothingBehind() throws Exception {
        DistributedLock lock = client.getLock("cancel-async");
        Lease holder = client.getLock("cancel-async").acquire(Duration.ofSeconds(1));
        CompletableFuture<Lease> waiting = lock.acquireAsync(Duration.ofSeconds(30));
        assertTrue(eventually(2000, () -> raw.num("ZCARD", key("cancel-async", ":queue")) == 1));
        assertTrue(waiting.cancel(true));
        assertTrue(eventually(2000, () -> raw.num("ZCARD", key("cancel-async", ":queue")) == 0),
            "the cancelled waiter left the queue");
        holder.close();
        assertEquals(0L, raw.num("EXISTS", key("cancel-async", "")), "nobody was granted the lock");
        lock.tryAcquire().orElseThrow().close();
    }

    @Test
    void toStringShowsNoSecretsAndUsefulState() throws Exception {
        Lease lease = client.getLock("show").acquire(Duration.ofSeconds(1));
        assertTrue(lease.toString().contains("show"));
        assertTrue(lease.toString().contains("held=true"));
        lease.close();
        assertTrue(lease.toString().contains("held=false"));
    }

    // What the backend can do, by the core's names in Java's spelling.
    @Test
    void aRedisClientReportsItsCapabilities() {
        Capabilities c = client.capabilities();
        assertEquals("Redis", c.backend());
        assertEquals("redis", c.scheme());
        for (String name : java.util.List.of("fencing", "fifo", "semaphore", "readWrite", "election", "observe", "reentrant",
                "readersFirst", "agreedParameters", "entryTtl", "listLocks", "adopt", "minHold")) {
            assertTrue(c.has(name), name + " in " + c);
        }
        assertFalse(c.has("replicaAcks"));
        assertFalse(c.has("no-such-capability"));
        assertEquals(java.util.List.of("fencing", "fifo", "semaphore", "readWrite", "election", "observe", "reentrant",
            "replicaAcks", "readersFirst", "agreedParameters", "entryTtl", "listLocks", "adopt", "minHold"), java.util.List.copyOf(c.all().keySet()));
    }
}
