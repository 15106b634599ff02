package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Listing locks from Java (issue 25): the page's Java shape, the cursor followed to the end, the
 * limit checked and capped. The cross-language and per-backend cases are the conformance
 * scenario list_locks.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ListLocksTest extends RedisTestBase {
    @Test
    void everyLockUnderThePrefixShowsOnceAcrossPages() throws Exception {
        assertEquals(new LockPage(List.of(), Optional.empty()), client.listLocks("jls:"));
        List<Lease> leases = new ArrayList<>();
        for (String n : List.of("jls:1", "jls:2", "jls:3", "other:1")) {
            leases.add(client.getLock(n).acquire(Duration.ofSeconds(5)));
        }
        leases.add(client.getSemaphore("jls:s", 2).acquire(Duration.ofSeconds(5)));
        List<String> names = new ArrayList<>();
        String cursor = null;
        int pages = 0;
        do {
            LockPage page = client.listLocks("jls:", 2, cursor);
            assertTrue(page.entries().size() <= 2);
            page.entries().forEach(e -> names.add(e.name()));
            cursor = page.cursor().orElse(null);
            pages++;
        } while (cursor != null);
        names.sort(null);
        assertEquals(List.of("jls:1", "jls:2", "jls:3", "jls:s"), names);
        assertTrue(pages >= 2);
        LockPage.Entry sem = client.listLocks("jls:s", Long.MAX_VALUE, null).entries().get(0);
        assertEquals(new LockPage.Entry("jls:s", "semaphore", 1, 0, sem.label()), sem);
        assertTrue(sem.label().isPresent());
        for (Lease l : leases) {
            l.release();
        }
        assertEquals(List.of(), client.listLocks("jls:").entries());
        assertThrows(LockInvalidArgumentException.class, () -> client.listLocks("jls:", 0, null));
        assertThrows(LockInvalidArgumentException.class, () -> client.listLocks("jls:", -1, null));
        assertThrows(LockInvalidArgumentException.class, () -> client.listLocks("jls:", 10, "nonsense"));
        assertThrows(LockInvalidArgumentException.class, () -> client.listLocks("}x"));
    }
}
