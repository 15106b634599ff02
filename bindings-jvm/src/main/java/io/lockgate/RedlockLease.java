package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.Failure;
import io.lockgate.internal.ffi.LossWatch;
import io.lockgate.internal.ffi.NativeRedlockLease;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * Proof that a majority of a {@link RedlockClient}'s masters holds the lock for you: extends,
 * releases and reports loss, like {@link Lease}. Not tied to a thread.
 *
 * <pre>{@code
 * try (RedlockLease lease = lock.acquire(Duration.ofSeconds(5))) {
 *     lease.onLost(reason -> cancelWork());        // a majority refused a renewal, or it ran out
 *     workThatEndsWithin(lease.remaining().orElseThrow());
 * }                                                // released on every master
 * }</pre>
 *
 * <p><b>There is no fencing token</b>, by design (PROTOCOL.md §8, "No fencing token"): a token
 * must be strictly larger than every earlier grant's, but a majority of independent masters is
 * not a linearizable counter. The masters that saw the previous grant may be exactly the
 * minority this grant did not reach (or may have restarted and forgotten it), so any token read
 * from them could go backwards. What this lease guarantees is its validity: while
 * {@link #isHeld()} is true and within {@link #remaining()}, no other client holds a valid
 * Redlock grant of the same name, provided clock drift stays within the allowance and the
 * process is not paused past the end of the lease. Where the protected resource needs fencing,
 * use {@link LockgateClient#getLock(String)}, whose {@link Lease#fencingToken()} is strictly
 * increasing, or a consensus backend.
 *
 * <p>Loss is loud: when a renewal is refused by a majority or the validity runs out before a
 * renewal succeeded, {@link #isHeld()} turns false, {@link #lost()} completes, {@link #onLost}
 * listeners run, and {@link #close()} throws {@link LockNotHeldException}.
 *
 * <p>Always release (or close) a lease. One that is garbage-collected unreleased is released in
 * the background eventually, but until then (with auto-renewal) the lock stays held.
 */
public final class RedlockLease implements AutoCloseable {
    private final NativeRedlockLease lease;
    private final String name;
    private final AtomicBoolean released = new AtomicBoolean();
    private volatile boolean closed;
    private volatile LockException closedLossReason;
    private final AtomicBoolean watching = new AtomicBoolean();
    private final CompletableFuture<LockException> lossReason = new CompletableFuture<>();

    RedlockLease(NativeRedlockLease lease, String name) {
        this.lease = lease;
        this.name = name;
    }

    /** A granted acquisition as a lease; a missing grant is a protocol failure. */
    static RedlockLease granted(NativeRedlockLease l, String name) {
        if (l == null) {
            throw new LockProtocolException("the acquisition ended without a lease", false);
        }
        return new RedlockLease(l, name);
    }

    /** Frees a grant nobody will use; the native side releases it in the background. */
    static void discard(NativeRedlockLease l) {
        if (l != null) {
            l.destroy();
        }
    }

    /** The name of the lock this lease holds. */
    public String name() {
        return name;
    }

    /** Whether the lease is certainly still valid now (drift deducted, renewed, not lost, not released). */
    public boolean isHeld() {
        return !closed && lease.isHeld();
    }

    /**
     * How long the lease is certainly still valid, if held: finish the protected work within it.
     * Counted from before the grant was requested, minus the drift allowance.
     */
    public Optional<Duration> remaining() {
        if (closed) {
            return Optional.empty();
        }
        Long nanos = lease.remainingNanos();
        return nanos == null ? Optional.empty() : Optional.of(Duration.ofNanos(nanos));
    }

    /** Why the lease was lost, if it was. */
    public Optional<LockException> lostReason() {
        if (closed) {
            return Optional.ofNullable(closedLossReason);
        }
        Failure f = lease.lostReason();
        return f == null ? Optional.empty() : Optional.of(Errors.fromFailure(f));
    }

    /**
     * Sets the remaining lease to {@code duration} (at most the deployment's {@code maxLease}) on
     * every master still holding it; needs a majority. Never re-acquires: if a majority lost the
     * key this throws {@link LockNotHeldException} and the lease counts as lost. Unreachable
     * masters give a retryable {@link LockConnectionException}. Blocking, bounded by the
     * response timeout.
     */
    public void extend(Duration duration) {
        Objects.requireNonNull(duration, "duration");
        checkOpen();
        double secs = Futures.secs(duration);
        Futures.uninterruptibly(() -> {
            Bridge.redlockExtendBlocking(lease, secs);
            return null;
        });
    }

    /** {@link #extend(Duration)} without blocking. */
    public CompletableFuture<Void> extendAsync(Duration duration) {
        Objects.requireNonNull(duration, "duration");
        checkOpen();
        return Futures.map(Bridge.redlockExtend(lease, Futures.secs(duration)), v -> null, v -> {});
    }

    /**
     * Releases the lock on every master (only where this lease still holds it). Returns
     * {@code true} if a majority still held it, {@code false} if not or if already released.
     * Throws {@link LockConnectionException} (retryable) if too few masters confirmed: the
     * others keep the key until its lease ends. Either way renewal stops.
     */
    public boolean release() {
        released.set(true);
        if (closed) {
            return false;
        }
        try {
            return Futures.uninterruptibly(() -> Bridge.redlockReleaseBlocking(lease));
        } catch (RuntimeException e) {
            dispose();
            throw e;
        }
    }

    /** {@link #release()} without blocking. */
    public CompletableFuture<Boolean> releaseAsync() {
        released.set(true);
        if (closed) {
            return CompletableFuture.completedFuture(false);
        }
        return Futures.map(Bridge.redlockRelease(lease), b -> b, b -> {});
    }

    /**
     * Releases the lease (for try-with-resources). Idempotent, and a no-op after
     * {@link #release()}. If the lease had already been lost, throws
     * {@link LockNotHeldException}: the block may have run without exclusivity.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        if (released.getAndSet(true)) {
            dispose();
            return;
        }
        boolean wasHeld;
        try {
            wasHeld = Futures.uninterruptibly(() -> Bridge.redlockReleaseBlocking(lease));
        } catch (RuntimeException e) {
            dispose();
            throw e;
        }
        if (!wasHeld) {
            LockException reason = lostReasonFromNative();
            closedLossReason = reason;
            dispose();
            throw new LockNotHeldException("Redlock '" + name + "' was no longer held by a majority when its lease"
                + " was closed" + (reason == null ? "" : ": " + reason.getMessage()), false);
        }
        dispose(false);
    }

    /** Frees the native handle now (a lease still held is released in the background). */
    void dispose() {
        dispose(true);
    }

    void dispose(boolean mayBeLost) {
        if (closed) {
            return;
        }
        released.set(true);
        if (mayBeLost && closedLossReason == null) {
            closedLossReason = lostReasonFromNative();
        }
        closed = true;
        lease.destroy();
    }

    private LockException lostReasonFromNative() {
        Failure f = lease.lostReason();
        return f == null ? null : Errors.fromFailure(f);
    }

    private void checkOpen() {
        if (closed) {
            throw new LockNotHeldException("Redlock '" + name + "': the lease was closed", false);
        }
    }

    /**
     * Completes (normally) when the lease is lost: a majority refused a renewal, or its validity
     * ran out before a renewal succeeded. Never completes on a normal release. Each call returns
     * a new dependent future.
     */
    public CompletableFuture<Void> lost() {
        watch();
        return lossReason.thenApply(reason -> null);
    }

    /**
     * Runs {@code listener} with the reason when the lease is lost (at once if it already was),
     * on a lockgate thread: keep it short and non-blocking. Not called on a normal release.
     */
    public void onLost(Consumer<? super LockException> listener) {
        Objects.requireNonNull(listener, "listener");
        watch();
        lossReason.thenAccept(listener);
    }

    /** Starts watching for loss once. The watch ends when the lease is released or freed. */
    private void watch() {
        if (closed) {
            LockException reason = closedLossReason;
            if (reason != null) {
                lossReason.complete(reason);
            }
            return;
        }
        if (!watching.compareAndSet(false, true)) {
            return;
        }
        LossWatch w = lease.lossWatch();
        CompletableFuture<LockException> target = lossReason;
        Bridge.lossOutcome(w).whenComplete((failure, err) -> {
            if (failure != null) {
                target.complete(Errors.fromFailure(failure));
            }
        });
    }

    @Override
    public String toString() {
        return "RedlockLease{name=" + name + ", held=" + isHeld() + "}";
    }
}
