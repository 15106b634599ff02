package io.lockgate;

import static io.lockgate.TestUtil.eventually;
import static io.lockgate.TestUtil.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 13, item 5: a JVM that ends while holding or waiting (SIGTERM, SIGINT, System.exit, the
 * end of main) releases its leases and withdraws its queue entries at once, through the exit
 * hook, instead of leaving them to expire (30 s leases, 10 s entry TTL here).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ExitCleanupTest extends RedisTestBase {
    private static final long LEASE_MS = 30_000;

    /** Sends {@code signal} (e.g. {@code TERM}, {@code INT}) to {@code p}, which this test started. */
    private static void signal(Process p, String signal) throws Exception {
        assertEquals(0, new ProcessBuilder("kill", "-" + signal, String.valueOf(p.pid())).start().waitFor());
    }

    private static String firstLine(Process p) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = r.readLine();
        if (line == null) {
            throw new IllegalStateException("worker exited early (exit " + p.waitFor() + ")");
        }
        return line.trim();
    }

    private void assertReleasedAtOnceWhenTheHolderEnds(String name, String kind, String arg, String signal)
        throws Exception {
        Process p = HolderWorker.start(server, kind, name, LEASE_MS, arg);
        try {
            long token = Long.parseLong(firstLine(p));
            assertEquals(1L, raw.num("EXISTS", key(name, "")), "held by the worker");
            long t0 = System.nanoTime();
            if (signal != null) {
                signal(p, signal);
            } else {
                p.getOutputStream().write('\n'); // the worker's go-ahead to exit by itself
                p.getOutputStream().flush();
            }
            assertTrue(p.waitFor(10, TimeUnit.SECONDS), "the worker exited");
            assertTrue(eventually(1000, () -> raw.num("EXISTS", key(name, "")) == 0),
                "released when the holder ended, not after its " + LEASE_MS + " ms lease");
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms < 5000, "released within " + ms + " ms");
            try (Lease next = client.getLock(name).tryAcquire().orElseThrow(() -> new AssertionError("free"))) {
                assertTrue(next.fencingToken().getAsLong() > token);
            }
        } finally {
            p.destroyForcibly();
        }
    }

    @Test
    void holderKilledWithSigtermReleasesAtOnce() throws Exception {
        assertReleasedAtOnceWhenTheHolderEnds("exit-term", "lock", "-", "TERM");
    }

    // The application's own shutdown hook closes the client while lockgate's hook does too: both
    // join one close, nothing waits for itself, and the lock is released at once.
    @Test
    void anOwnCloseRacingTheExitHookDoesNotDeadlock() throws Exception {
        assertReleasedAtOnceWhenTheHolderEnds("exit-own-hook", "lock-own-hook", "-", "TERM");
    }

    @Test
    void holderCallingSystemExitReleasesAtOnce() throws Exception {
        assertReleasedAtOnceWhenTheHolderEnds("exit-system", "lease-exit", "exit", null);
    }

    @Test
    void holderWhoseMainReturnsReleasesAtOnce() throws Exception {
        assertReleasedAtOnceWhenTheHolderEnds("exit-return", "lease-exit", "return", null);
    }

    // A waiter killed with SIGINT (Ctrl-C) leaves the queue at once: the next waiter gets the
    // lock as soon as the holder releases, not after the dead waiter's 10 s entry TTL.
    @Test
    void waiterKilledWithSigintLeavesTheQueue() throws Exception {
        String name = "exit-wait";
        Lease held = client.getLock(name).acquire(Duration.ofSeconds(1));
        Process p = HolderWorker.start(server, "wait", name, LEASE_MS, "-");
        try {
            assertEquals("waiting", firstLine(p));
            assertTrue(eventually(10_000, () -> raw.num("ZCARD", key(name, ":queue")) == 1), "the worker queued");
            CompletableFuture<Lease> next = CompletableFuture.supplyAsync(() -> {
                try {
                    return client.getLock(name).acquire(Duration.ofSeconds(30));
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            assertTrue(eventually(5000, () -> raw.num("ZCARD", key(name, ":queue")) == 2), "queued behind the worker");
            signal(p, "INT");
            assertTrue(p.waitFor(10, TimeUnit.SECONDS), "the worker exited");
            assertTrue(eventually(1000, () -> raw.num("ZCARD", key(name, ":queue")) == 1),
                "the dead waiter's entry was withdrawn");
            long t0 = System.nanoTime();
            assertTrue(held.release());
            try (Lease l = next.get(5, TimeUnit.SECONDS)) {
                long ms = (System.nanoTime() - t0) / 1_000_000;
                assertTrue(ms < 2000, "handed over in " + ms + " ms");
                assertTrue(l.fencingToken().getAsLong() > held.fencingToken().getAsLong());
            }
        } finally {
            p.destroyForcibly();
        }
    }
}
