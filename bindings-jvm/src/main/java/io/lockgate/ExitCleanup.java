package io.lockgate;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Closes every open client when the JVM exits (normal exit, {@code System.exit}, SIGINT,
 * SIGTERM, SIGHUP), so a process that ends while holding or waiting for locks releases its
 * leases and withdraws its queue entries at once instead of leaving them to expire (a held lock
 * would otherwise stay held for the rest of its lease, a queued waiter delay the next one by its
 * entry TTL). Best effort and bounded: one JVM shutdown hook, installed with the first client,
 * starts every close at once and waits at most {@link #DEADLINE_MS} for them all; SIGKILL and
 * crashes still leave the leases to expire. A client closed by its owner meanwhile (even from
 * another shutdown hook) shares the same close, so nothing waits for itself.
 */
final class ExitCleanup {
    /** How long the hook waits for the releases to reach the servers. */
    static final long DEADLINE_MS = 1500;

    /** Something to close at exit: a {@link LockgateClient} or a {@link RedlockClient}. */
    interface Closer {
        /** Starts closing (or joins a close already started); completes when closed. */
        CompletableFuture<Void> beginClose();
    }

    private static final Set<Closer> OPEN = ConcurrentHashMap.newKeySet();
    private static final AtomicBoolean INSTALLED = new AtomicBoolean();

    private ExitCleanup() {}

    /** Closes {@code c} at exit unless it is {@link #forget forgotten} first. */
    static void register(Closer c) {
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
    static void forget(Closer c) {
        OPEN.remove(c);
    }

    private static void closeAll() {
        List<CompletableFuture<Void>> closing = new ArrayList<>();
        for (Closer c : List.copyOf(OPEN)) {
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
