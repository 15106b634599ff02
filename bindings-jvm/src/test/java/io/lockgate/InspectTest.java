package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Inspecting a lock from Java (issue 25): the snapshot's Java shape, isLocked(), by name and
 * through handles. The cross-language and per-backend cases are the conformance scenarios
 * inspect_*.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class InspectTest extends RedisTestBase {
    @Test
    void theHolderShowsWithItsTokenAndLeaseAndNothingElseChanges() throws Exception {
        LockSnapshot empty = client.inspect("orders");
        assertEquals(new LockSnapshot("mutex", List.of(), List.of(), java.util.OptionalLong.empty()), empty);
        DistributedLock lock = client.getLock("orders");
        assertFalse(lock.isLocked());
        try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
            LockSnapshot s = client.inspect("orders", "mutex");
            LockSnapshot.Holder h = s.holders().get(0);
            assertEquals(lease.fencingToken(), h.fencingToken());
            assertFalse(h.shared());
            assertEquals(1L, h.holds().getAsLong(), "this client's own holder shows its holds");
            Duration left = h.remaining().orElseThrow();
            assertTrue(!left.isNegative() && left.compareTo(Duration.ofSeconds(30)) <= 0, String.valueOf(left));
            assertTrue(lock.isLocked());
            assertEquals(s.remaining(), h.remaining());
        }
        assertFalse(lock.isLocked());
        assertThrows(LockInvalidArgumentException.class, () -> client.inspect("orders", "table"));
        assertThrows(LockInvalidArgumentException.class, () -> client.inspect(""));
    }

    @Test
    void aSemaphoreAndAnElectionInspectAsWholes() throws Exception {
        DistributedSemaphore sem = client.getSemaphore("pool", 2);
        try (Lease permit = sem.acquire(Duration.ofSeconds(5))) {
            LockSnapshot s = sem.inspect();
            assertEquals("semaphore", s.kind());
            assertEquals(2L, s.permits().getAsLong());
            assertTrue(s.holders().get(0).shared());
        }
        LeaderElection election = client.getElection("svc");
        try (Lease leadership = election.campaign("10.0.0.1:80", Duration.ofSeconds(5))) {
            assertEquals("10.0.0.1:80", election.inspect().holders().get(0).value().orElseThrow());
        }
    }
}
