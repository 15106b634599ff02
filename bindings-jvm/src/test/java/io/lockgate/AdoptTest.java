package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Handing a lease to another process from Java (issue 25, PROTOCOL.md §17):
 * {@link Lease#identity()} and {@link LockgateClient#adopt(String, LockOptions)} — the same hold
 * and fencing token, the exporter's loss once the adopter releases, stale and malformed
 * identities — and the README migration row for redis-py's {@code Lock(token=...)}. The
 * cross-language and per-backend cases are the conformance scenario adopt_lease.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AdoptTest extends RedisTestBase {
    @Test
    void anAdoptedLeaseIsTheSameHoldAndTheExporterSeesItsRelease() throws Exception {
        try (LockgateClient other = LockgateClient.connect(server.url())) {
            Lease held = client.getLock("adopt", LockOptions.renewedLease(Duration.ofMillis(900))).acquire(Duration.ofSeconds(5));
            String identity = held.identity();
            Lease adopted = other.adopt(identity, LockOptions.renewedLease(Duration.ofMillis(900)));
            assertEquals("adopt", adopted.name());
            assertEquals(held.fencingToken(), adopted.fencingToken(), "no second grant");
            assertEquals(Optional.empty(), other.getLock("adopt").tryAcquire());
            adopted.extend(Duration.ofSeconds(5));
            assertTrue(adopted.release());
            held.lost().get(5, TimeUnit.SECONDS);
            assertFalse(held.release(), "the exporter's release finds nothing");
            assertThrows(LockNotHeldException.class, () -> other.adopt(identity));
            assertThrows(LockInvalidArgumentException.class, () -> other.adopt("lockgate-lease/1/mutex/1/not a token/x"));
            assertThrows(LockInvalidArgumentException.class, () -> other.adopt(""));
            assertThrows(LockNotHeldException.class, held::identity);
        }
    }

    @Test
    void redisPyLockWithTokenMigrationRow() throws Exception {
        try (LockgateClient other = LockgateClient.connect(server.url())) {
            Lease lease = client.getSemaphore("job-slots", 2).acquire(Duration.ofSeconds(5));
            Lease same = other.adopt(lease.identity());
            assertEquals(lease.fencingToken(), same.fencingToken());
            assertTrue(same.release());
            assertFalse(lease.release());
        }
    }
}
