package io.lockgate;

import io.lockgate.internal.Bridge;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Closes every open client when the JVM exits (normally, {@code System.exit}, SIGINT, SIGTERM,
 * SIGHUP), so held leases are released and queued waits withdrawn at once rather than left to
 * expire. One shutdown hook, installed with the first client, starts every close and waits at
 * most {@link #DEADLINE_MS}; a close by the owner meanwhile is the same close (no self-wait).
 */
final class ExitCleanup {
    /** How long the hook waits for the releases to reach the servers: the core's one exit grace. */
    static final long DEADLINE_MS = Bridge.exitGraceMs();

    private static final Set<LockgateClient> OPEN = ConcurrentHashMap.newKeySet();
    private static final AtomicBoolean INSTALLED = new AtomicBoolean();

    private ExitCleanup() {}

    /** Closes {@code c} at exit unless it is {@link #forget forgotten} first. */
    static void register(LockgateClient c) {
        if (INSTALLED.compareAndSet(false, true)) {
            try {
                Runtime.getRuntime().addShutdownHook(new Thread(ExitCleanup::closeAll, "lockgate-exit-cleanup"));
            } catch (IllegalStateException alreadyExiting) {
                return; // connected while the JVM shuts down: nothing can run at exit any more
            }
        }
        OPEN.add(c);
    }

    /** {@code c} was closed by its owner. */
    static void forget(LockgateClient c) {
        OPEN.remove(c);
    }

    private static void closeAll() {
        List<CompletableFuture<Void>> closing = new ArrayList<>();
        for (LockgateClient c : List.copyOf(OPEN)) {
            try {
                closing.add(c.beginClose());
            } catch (Throwable ignored) {
                // best effort: one client failing to start its close must not stop the others
            }
        }
        try {
            CompletableFuture.allOf(closing.toArray(new CompletableFuture<?>[0]))
                .get(DEADLINE_MS, TimeUnit.MILLISECONDS);
        } catch (Exception ignored) {
            // deadline passed, a close failed, or interrupted: the JVM exits anyway; the leases
            // left behind expire with their lease and the queue entries with their entry TTL
        }
    }
}
