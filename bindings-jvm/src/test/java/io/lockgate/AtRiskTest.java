package io.lockgate;

import static io.lockgate.TestUtil.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Leases at risk on ZooKeeper (one server behind the launcher's proxy): a holder that cannot
 * reach its server sees {@link Lease#isAtRisk()} and its {@link Lease#onAtRisk} listeners run
 * once per spell; reconnecting within the session makes it safe again with the same lease, and
 * the loss signal stays quiet.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AtRiskTest {
    /** A confirmation counts for 6 s and renewals go every 2 s: a 2 s freeze is well within it. */
    private static final ClientOptions OPTIONS = ClientOptions.builder()
        .set("sessionTimeout", Duration.ofSeconds(12)).responseTimeout(Duration.ofMillis(800)).build();

    @Test
    void aHolderIsToldAtRiskAndKeepsItsLeaseByReconnecting() throws Exception {
        try (TestServers zk = TestServers.start("zookeeper", "--proxied");
             LockgateClient client = LockgateClient.connect(zk.url(), OPTIONS)) {
            Lease lease = client.getLock("jvm-at-risk").acquire(Duration.ofSeconds(5));
            long token = lease.fencingToken().getAsLong();
            assertFalse(lease.isAtRisk());
            List<Long> spells = new CopyOnWriteArrayList<>();
            lease.onAtRisk(() -> spells.add(System.nanoTime()));
            // A listener that throws harms neither the process nor the other listeners.
            lease.onAtRisk(() -> { throw new IllegalStateException("a listener's bug"); });
            CompletableFuture<Void> lost = lease.lost();

            // Replies held back: the client leaves the connection (at risk) and reconnects.
            zk.command("deafen");
            assertTrue(eventually(5_000, () -> spells.size() == 1), "the listener ran for the spell");
            assertTrue(eventually(5_000, () -> !lease.isAtRisk()), "safe again after reconnecting");
            zk.command("restore");

            // The server freezes: at risk (still held) while it lasts; a listener added meanwhile runs at once.
            zk.command("pause 0");
            long paused = System.nanoTime();
            CountDownLatch late = new CountDownLatch(1);
            try {
                assertTrue(eventually(1_800, lease::isAtRisk), "at risk while the server is frozen");
                assertTrue(lease.isHeld(), "at risk is still held");
                lease.onAtRisk(late::countDown);
                assertTrue(late.await(1, TimeUnit.SECONDS), "a listener added while at risk runs at once");
            } finally {
                Thread.sleep(Math.max(0, 2_000 - (System.nanoTime() - paused) / 1_000_000));
                zk.command("resume 0");
            }
            assertTrue(eventually(2_000, () -> spells.size() == 2), "one call per spell: " + spells);
            assertTrue(eventually(5_000, () -> !lease.isAtRisk()), "safe again after the server resumed");
            assertTrue(lease.isHeld());
            assertFalse(lost.isDone(), "no loss signal");
            assertEquals(token, lease.fencingToken().getAsLong());
            assertTrue(lease.release());
            assertFalse(lease.isAtRisk());
            assertEquals(2, spells.size(), "no spell after the release");
            assertNotEquals(0, token);
        }
    }

    @Test
    void aClosedLeaseIsNotAtRiskAndTakesNoListener() throws Exception {
        try (TestServers zk = TestServers.start("zookeeper");
             LockgateClient client = LockgateClient.connect(zk.url(), OPTIONS)) {
            Lease lease = client.getLock("jvm-at-risk-closed").acquire(Duration.ofSeconds(5));
            lease.close();
            assertFalse(lease.isAtRisk());
            lease.onAtRisk(() -> { throw new AssertionError("never called"); });
            assertThrows(NullPointerException.class, () -> lease.onAtRisk(null));
        }
    }
}
