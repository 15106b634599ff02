package io.lockgate;

import static io.lockgate.TestUtil.key;
import static io.lockgate.TestUtil.liveKeys;
import static io.lockgate.TestUtil.zcardAtLeast;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** LeaderElection: one leader, observe, resign and hand over, crash, loss signal, bad input. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class LeaderElectionTest extends RedisTestBase {
    @Test
    void oneLeaderObservedAndResignHandsOverWithALargerTerm() throws Exception {
        LeaderElection election = client.getElection("lead");
        assertEquals(Optional.empty(), election.observe());
        Lease alpha = election.campaign("alpha", Duration.ofSeconds(1));
        Leader seen = election.observe().orElseThrow();
        assertEquals("alpha", seen.value());
        assertEquals(alpha.fencingToken().getAsLong(), seen.term(), "the term is the leadership's fencing token");
        assertTrue(!seen.remaining().isNegative() && seen.remaining().compareTo(Duration.ofSeconds(30)) <= 0,
            String.valueOf(seen.remaining()));
        try (LockgateClient other = LockgateClient.connect(server.url())) {
            LeaderElection election2 = other.getElection("lead");
            CompletableFuture<Lease> beta = election2.campaignAsync("beta", Duration.ofSeconds(10));
            assertTrue(zcardAtLeast(raw, key("lead", ":elect:queue"), 1, 5000), "beta queued as candidate");
            assertTrue(election2.tryCampaign("gamma").isEmpty(), "one leader at a time");
            Thread.sleep(100);
            assertFalse(beta.isDone());
            assertEquals("alpha", election2.observeAsync().get(5, TimeUnit.SECONDS).orElseThrow().value());
            alpha.close(); // resigns
            Lease b = beta.get(5, TimeUnit.SECONDS);
            assertTrue(b.fencingToken().getAsLong() > alpha.fencingToken().getAsLong(), "a later leader has a larger term");
            Leader now = election.observe().orElseThrow();
            assertEquals(new Leader("beta", b.fencingToken().getAsLong(), Duration.ZERO), now);
            assertTrue(b.release(), "resign");
        }
        assertEquals(Optional.empty(), election.observe());
        assertEquals(List.of(), liveKeys(raw, "lead"));
    }

    // Deleting the holders key behind the leader's back is reported as lost leadership.
    @Test
    void lossSignalWhenTheHoldersKeyIsDeleted() throws Exception {
        LeaderElection election = client.getElection("loss", LockOptions.renewedLease(Duration.ofMillis(600)));
        Lease leadership = election.campaign("alpha");
        CompletableFuture<LockException> reason = new CompletableFuture<>();
        leadership.onLost(reason::complete);
        assertEquals(1L, raw.num("DEL", key("loss", ":elect:holders")));
        LockException e = reason.get(3, TimeUnit.SECONDS);
        assertEquals("NOT_HELD", e.code());
        leadership.lost().get(1, TimeUnit.SECONDS);
        assertFalse(leadership.isHeld());
        assertEquals(Optional.empty(), election.observe());
        assertThrows(LockNotHeldException.class, leadership::close, "resigning a lost leadership is loud");
        assertEquals(List.of(), liveKeys(raw, "loss"));
    }

    @Test
    void campaignTimeoutLeavesNoEntry() throws Exception {
        LeaderElection election = client.getElection("elect-timeout");
        LeaderElection candidateB = client.getElection("elect-timeout"); // another candidate, same process
        try (Lease leader = election.campaign("a", Duration.ofSeconds(1))) {
            // One LeaderElection is one candidate: while it leads, it does not queue behind itself.
            LockAlreadyHeldException self =
                assertThrows(LockAlreadyHeldException.class, () -> election.campaign("a2", Duration.ofSeconds(30)));
            assertEquals("ALREADY_HELD", self.code());
            long t0 = System.nanoTime();
            LockTimeoutException e =
                assertThrows(LockTimeoutException.class, () -> candidateB.campaign("b", Duration.ofMillis(200)));
            assertTrue((System.nanoTime() - t0) / 1_000_000 >= 190);
            assertTrue(e.isRetryable());
            // The withdrawal reaches the server just after the TIMEOUT (the conformance suite allows 50 ms).
            assertTrue(TestUtil.eventually(1000, () -> raw.num("ZCARD", key("elect-timeout", ":elect:queue")) == 0),
                "the timed-out candidate left the queue");
            assertEquals("a", election.observe().orElseThrow().value());
            // campaign(value) without a timeout waits for the options' waitTimeout (the core's rule).
            LeaderElection limited =
                client.getElection("elect-timeout", LockOptions.builder().waitTimeout(Duration.ofMillis(200)).build());
            assertThrows(LockTimeoutException.class, () -> limited.campaign("c"));
            assertThrows(LockTimeoutException.class, () -> {
                try {
                    limited.campaignAsync("c").join();
                } catch (java.util.concurrent.CompletionException failed) {
                    throw failed.getCause();
                }
            });
        }
        assertEquals(List.of(), liveKeys(raw, "elect-timeout"));
    }

    @Test
    void badInputIsInvalidArgument() {
        LeaderElection election = client.getElection("elect-bad");
        String big = "x".repeat(4097);
        LockInvalidArgumentException e =
            assertThrows(LockInvalidArgumentException.class, () -> election.campaign(big, Duration.ofSeconds(1)));
        assertEquals("INVALID_ARGUMENT", e.code());
        assertFalse(e.isRetryable());
        assertThrows(LockInvalidArgumentException.class, () -> election.tryCampaign(big));
        assertThrows(LockInvalidArgumentException.class, () -> election.campaign("ok", Duration.ofMillis(-1)));
        assertThrows(LockInvalidArgumentException.class, () -> client.getElection(""));
        assertThrows(LockInvalidArgumentException.class,
            () -> client.getElection("elect-bad", LockOptions.builder().reentrant(true).build()),
            "leadership is never reentrant");
        assertEquals(List.of(), liveKeys(raw, "elect-bad"));
        assertEquals(0L, raw.num("EXISTS", key("elect-bad", ":elect:fence")));
    }
}
