package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The README's example, as written, against a real server. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ReadmeExampleTest {
    final List<Long> written = new ArrayList<>();

    void write(long token) {
        written.add(token);
    }

    CompletableFuture<Void> doWorkAsync(long token) {
        return CompletableFuture.runAsync(() -> write(token));
    }

    @Test
    void readmeExampleRuns() throws Exception {
        try (RedisServer server = RedisServer.start()) {
            try (LockgateClient client = LockgateClient.connect(server.url())) {
                DistributedLock lock = client.getLock("orders:42");

                try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                    lease.onLost(reason -> System.err.println("lost: " + reason));
                    write(lease.fencingToken());
                }

                lock.lock();
                try {
                    write(lock.currentLease().orElseThrow().fencingToken());
                } finally {
                    lock.unlock();
                }

                Boolean released = lock.acquireAsync(Duration.ofSeconds(5))
                    .thenCompose(lease -> doWorkAsync(lease.fencingToken()).thenCompose(x -> lease.releaseAsync()))
                    .get(10, TimeUnit.SECONDS);
                assertTrue(released);
            }
        }
        assertEquals(3, written.size());
        assertTrue(written.get(0) < written.get(1) && written.get(1) < written.get(2), "tokens increase");
    }
}
