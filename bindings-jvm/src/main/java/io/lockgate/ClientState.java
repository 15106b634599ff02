package io.lockgate;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * What the Java side keeps per client beside the native client: the {@code Lock} interface's
 * per-thread holds ({@link ThreadHolds}) and the leases kept reachable until released
 * ({@link OpenLeases}). Shared by every lock object made from the client.
 */
final class ClientState {
    final ThreadHolds threadHolds = new ThreadHolds();
    final OpenLeases openLeases = new OpenLeases();
    /** The one close of the client, once started. */
    private final AtomicReference<CompletableFuture<Void>> closing = new AtomicReference<>();

    /**
     * Starts the one close of {@code owner} with {@code shutdown} (the native client's), or returns
     * the close already started: {@code close()}, {@code closeAsync()} and the exit hook share it,
     * so a close racing the hook cannot deadlock or run twice.
     */
    CompletableFuture<Void> beginClose(ExitCleanup.Closer owner, Supplier<CompletableFuture<Void>> shutdown) {
        CompletableFuture<Void> mine = new CompletableFuture<>();
        if (!closing.compareAndSet(null, mine)) {
            return closing.get();
        }
        ExitCleanup.forget(owner);
        shutdown.get().whenComplete((v, err) -> {
            openLeases.clear(); // released by the shutdown (or expiring); nothing left to keep
            if (err != null) {
                mine.completeExceptionally(err);
            } else {
                mine.complete(null);
            }
        });
        return mine;
    }

    /** Whether the client's close has started. */
    boolean isClosing() {
        return closing.get() != null;
    }
}
