package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * {@code ClientOptions.builder().replicaAcks(n, timeout)} against a real primary and replica
 * started by each test: a grant counts only once WAIT confirms it reached the replica; with the
 * replica paused (SIGSTOP, sent by the test-server launcher) grants fail as connection errors and leave no lock behind.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ReplicaAcksTest {
    static final ClientOptions ACKED = ClientOptions.builder()
        .replicaAcks(1, Duration.ofMillis(200))
        .responseTimeout(Duration.ofSeconds(2))
        .build();

    TestServers pair;
    RedisServer primary;
    RedisServer replica;
    Resp primaryRaw;
    Resp replicaRaw;

    @BeforeEach
    void startPair() {
        // The launcher's primary syncs disklessly without Redis's default 5 s wait for more replicas.
        pair = TestServers.start("replica");
        primary = pair.nodes.get(0);
        replica = pair.nodes.get(1);
        assertEquals("replica", replica.info.get("role"));
        primaryRaw = primary.raw();
        replicaRaw = replica.raw();
        assertTrue(TestUtil.eventually(10_000, () -> {
            String info = primaryRaw.str("INFO", "replication");
            return info.contains("connected_slaves:1") && info.contains("state=online");
        }), "the replica came online");
    }

    @AfterEach
    void stopPair() {
        primaryRaw.close();
        replicaRaw.close();
        pair.close(); // the launcher stops a paused replica too
    }

    @Test
    void grantsAreConfirmedByTheReplica() throws Exception {
        try (LockgateClient client = LockgateClient.connect(primary.url(), ACKED);
             LockgateClient other = LockgateClient.connect(primary.url(), ACKED)) {
            Lease lease = client.getLock("acked").acquire(Duration.ofSeconds(5));
            assertTrue(lease.isHeld());
            // WAIT confirmed it: the replica has the lock key already, no polling needed.
            assertEquals(1L, replicaRaw.num("EXISTS", TestUtil.key("acked", "")));
            // A waiter in the same mode is handed the lock on release (its grant confirmed too).
            CompletableFuture<Lease> waiter = other.getLock("acked").acquireAsync(Duration.ofSeconds(10));
            Thread.sleep(200);
            assertFalse(waiter.isDone());
            assertTrue(lease.release());
            Lease next = waiter.get(10, TimeUnit.SECONDS);
            assertTrue(next.fencingToken().getAsLong() > lease.fencingToken().getAsLong());
            assertEquals(1L, replicaRaw.num("EXISTS", TestUtil.key("acked", "")));
            next.extend(Duration.ofSeconds(20)); // an extend is confirmed the same way
            assertTrue(next.release());
        }
        assertTrue(TestUtil.eventually(2000, () -> TestUtil.liveKeys(replicaRaw, "acked").isEmpty()),
            "the release replicated");
    }

    @Test
    void grantFailsAndIsUndoneWhileTheReplicaIsPaused() throws Exception {
        try (LockgateClient client = LockgateClient.connect(primary.url(), ACKED)) {
            DistributedLock lock = client.getLock("unconfirmed");
            replica.pause();
            try {
                long t0 = System.nanoTime();
                LockConnectionException e = assertThrows(LockConnectionException.class, lock::tryAcquire);
                assertEquals("CONNECTION", e.code());
                assertTrue(e.isRetryable());
                assertTrue(System.nanoTime() - t0 < 2_000_000_000L, "WAIT is bounded by its timeout");
                assertTrue(TestUtil.eventually(2000, () -> TestUtil.liveKeys(primaryRaw, "unconfirmed").isEmpty()),
                    "the unconfirmed grant was undone: " + TestUtil.liveKeys(primaryRaw, "unconfirmed"));
                // A waiting acquire keeps trying until its own timeout, then withdraws.
                LockConnectionException w = assertThrows(LockConnectionException.class, () -> lock.acquire(Duration.ofMillis(700)));
                // No replica acknowledged: CONNECTION naming the replicas, not TIMEOUT (issue 23 item 7).
                assertTrue(w.getMessage().contains("replicas"), w.getMessage());
                assertTrue(TestUtil.eventually(2000, () -> TestUtil.liveKeys(primaryRaw, "unconfirmed").isEmpty()),
                    "the abandoned wait was undone: " + TestUtil.liveKeys(primaryRaw, "unconfirmed"));
            } finally {
                replica.resume();
            }
            // Once the replica is back, grants are confirmed again.
            try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                assertTrue(lease.isHeld());
                assertEquals(1L, replicaRaw.num("EXISTS", TestUtil.key("unconfirmed", "")));
            }
        }
        assertEquals(List.of(), TestUtil.liveKeys(primaryRaw, "unconfirmed"));
    }

    // The contrast that shows the option is what makes the difference.
    @Test
    void withoutReplicaAcksAPausedReplicaGoesUnnoticed() throws Exception {
        try (LockgateClient client = LockgateClient.connect(primary.url())) {
            replica.pause();
            try (Lease lease = client.getLock("plain").acquire(Duration.ofSeconds(2))) {
                assertTrue(lease.isHeld());
            } finally {
                replica.resume();
            }
        }
    }

    private static void invalid(ClientOptions options, String what) {
        Executable connect = () -> LockgateClient.connect("redis://127.0.0.1:1", options); // never contacted
        LockInvalidArgumentException e = assertThrows(LockInvalidArgumentException.class, connect, what);
        assertEquals("INVALID_ARGUMENT", e.code(), what);
        assertFalse(e.isRetryable(), what);
    }

    @Test
    void badSettingsAreRejectedBeforeConnecting() {
        invalid(ClientOptions.builder().replicaAcks(0, Duration.ofMillis(100)).build(), "no replicas");
        invalid(ClientOptions.builder().replicaAcks(-1, Duration.ofMillis(100)).build(), "negative replicas");
        invalid(ClientOptions.builder().replicaAcks(1, Duration.ZERO).build(), "zero timeout");
        invalid(ClientOptions.builder().replicaAcks(1, Duration.ofMillis(-5)).build(), "negative timeout");
        invalid(ClientOptions.builder().replicaAcks(1, Duration.ofNanos(400_000)).build(), "below 1 ms");
        invalid(ClientOptions.builder().replicaAcks(1, Duration.ofSeconds(5)).build(),
            "not below the default 5 s response timeout");
        invalid(ClientOptions.builder().replicaAcks(1, Duration.ofSeconds(3)).responseTimeout(Duration.ofSeconds(2))
            .build(), "not below the response timeout");
        invalid(ClientOptions.builder().replicaAcks(1, Duration.ofDays(400)).build(), "over 30 days");
    }

    @Test
    void defaultTimeoutAndToString() throws Exception {
        ClientOptions o = ClientOptions.builder().replicaAcks(1, null).build();
        assertEquals("ClientOptions{replicaAcks=1, replicaAckTimeout=default}", o.toString());
        assertEquals("ClientOptions{}", ClientOptions.defaults().toString());
        // The default WAIT timeout (1 s) is valid with the default response timeout.
        try (LockgateClient client = LockgateClient.connect(primary.url(), o);
             Lease lease = client.getLock("defaults").acquire(Duration.ofSeconds(5))) {
            assertTrue(lease.isHeld());
            assertEquals(1L, replicaRaw.num("EXISTS", TestUtil.key("defaults", "")));
            assertTrue(client.capabilities().has("replicaAcks"), client.capabilities().toString());
        }
    }
}
