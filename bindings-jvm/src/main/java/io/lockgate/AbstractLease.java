package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.Failure;
import io.lockgate.internal.ffi.LossWatch;
import io.lockgate.internal.ffi.NativeLease;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * What {@link Lease} and {@link RedlockLease} share: the native lease, its state after release
 * or close, extend, release, close and loss notification. Package-private on purpose: the public
 * types are the two subclasses, and nothing here is a fencing token (a Redlock grant has none;
 * {@link Lease#fencingToken()} is declared by {@link Lease} alone).
 */
abstract class AbstractLease implements AutoCloseable {
    private final NativeLease lease;
    private final String name;
    /** {@code "lock"} or {@code "Redlock"}, for messages. */
    private final String kind;
    /** Set once this lease's owner released or closed it. */
    private final AtomicBoolean released = new AtomicBoolean();
    /** Set once closed: the native handle is freed and the final state is kept here. */
    private volatile boolean closed;
    private volatile LockException closedLossReason;
    private final AtomicBoolean watching = new AtomicBoolean();
    /** Completes with the reason once lost; stays pending if released normally. */
    private final CompletableFuture<LockException> lossReason = new CompletableFuture<>();
    /** Keeps this lease reachable until it is released or closed (see {@link OpenLeases}). */
    private final OpenLeases openLeases;

    AbstractLease(NativeLease lease, String name, String kind, OpenLeases openLeases) {
        this.lease = lease;
        this.name = name;
        this.kind = kind;
        this.openLeases = openLeases;
        openLeases.add(this);
    }

    /** Frees a grant nobody will use; the native side releases it in the background. */
    static void discard(NativeLease lease) {
        if (lease != null) {
            lease.destroy();
        }
    }

    /** The lease as messages name it: {@code lock 'name'} or {@code Redlock 'name'}. */
    final String label() {
        return kind + " '" + name + "'";
    }

    /** How {@link #close()} names the lease when it was found lost (the lock's adds its fencing token). */
    abstract String closedUnheldMessage();

    /** The name of the lock this lease holds. */
    public String name() {
        return name;
    }

    /**
     * Whether the lease is certainly still held now (renewed, not expired, not lost, not
     * released; for a Redlock, still valid with the drift allowance deducted).
     */
    public boolean isHeld() {
        return !closed && lease.isHeld();
    }

    /**
     * How long the lease is certainly still valid, if held: finish the protected work within it.
     * (A Redlock lease counts from before the grant was requested, minus the drift allowance.)
     */
    public Optional<Duration> remaining() {
        if (closed) {
            return Optional.empty();
        }
        Long nanos = lease.remainingNanos();
        return nanos == null ? Optional.empty() : Optional.of(Duration.ofNanos(nanos));
    }

    /** Why the lease was lost, if it was (usually a {@link LockNotHeldException}). */
    public Optional<LockException> lostReason() {
        if (closed) {
            return Optional.ofNullable(closedLossReason);
        }
        return Optional.ofNullable(lostReasonFromNative());
    }

    /**
     * Sets the remaining lease to {@code duration} if still held (a Redlock: at most the
     * deployment's {@code maxLease}, on every master still holding it, needing a majority).
     * Never re-acquires: if the lease already expired or was taken over this throws
     * {@link LockNotHeldException} (and the lease counts as lost); unreachable servers give a
     * retryable {@link LockConnectionException}. Blocking, bounded by the client's response
     * timeout.
     */
    public void extend(Duration duration) {
        Objects.requireNonNull(duration, "duration");
        checkOpen();
        double secs = Futures.secs(duration);
        Futures.uninterruptibly(() -> {
            Bridge.extendBlocking(lease, secs);
            return null;
        });
    }

    /** {@link #extend(Duration)} without blocking. */
    public CompletableFuture<Void> extendAsync(Duration duration) {
        Objects.requireNonNull(duration, "duration");
        checkOpen();
        return Futures.map(Bridge.extend(lease, Futures.secs(duration)), v -> null, v -> {});
    }

    /**
     * Releases the lock (only where this lease still holds it: another holder's key is never
     * touched; a Redlock on every master). Returns {@code true} if it was still held (a Redlock:
     * by a majority), {@code false} if it had already expired, been lost, or been released.
     * Blocking, bounded by the response timeout. On a failure (e.g. {@link LockConnectionException},
     * for a Redlock also when too few masters confirmed) the lease is given up: renewal stops at
     * once and the core keeps releasing it in the background (else it expires with its lease).
     */
    public boolean release() {
        released.set(true);
        openLeases.forget(this);
        if (closed) {
            return false;
        }
        try {
            return Futures.uninterruptibly(() -> Bridge.releaseBlocking(lease));
        } catch (RuntimeException e) {
            dispose();
            throw e;
        }
    }

    /** {@link #release()} without blocking. */
    public CompletableFuture<Boolean> releaseAsync() {
        released.set(true);
        openLeases.forget(this);
        if (closed) {
            return CompletableFuture.completedFuture(false);
        }
        return Futures.map(Bridge.release(lease), b -> b, b -> {});
    }

    /**
     * Releases the lease (for try-with-resources). Idempotent, and a no-op after
     * {@link #release()}. If the lease had already been lost, throws
     * {@link LockNotHeldException}: the code in the block may have run without exclusivity,
     * and that must not pass silently.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        openLeases.forget(this);
        if (released.getAndSet(true)) {
            dispose();
            return;
        }
        boolean wasHeld;
        try {
            wasHeld = Futures.uninterruptibly(() -> Bridge.releaseBlocking(lease));
        } catch (RuntimeException e) {
            dispose(); // stops renewal at once; the core retries the release in the background
            throw e;
        }
        if (!wasHeld) {
            LockException reason = lostReasonFromNative();
            closedLossReason = reason;
            dispose();
            throw new LockNotHeldException(closedUnheldMessage()
                + (reason == null ? "" : ": " + reason.getMessage()), false);
        }
        dispose(false);
    }

    /**
     * Frees the native handle now. If the lease was still held, the core releases it in the
     * background (and renewal stops at once). Afterwards the lease reports not held.
     */
    void dispose() {
        dispose(true);
    }

    /** {@code mayBeLost}: whether to keep the loss reason (false after a release that found it held). */
    void dispose(boolean mayBeLost) {
        if (closed) {
            return;
        }
        released.set(true);
        openLeases.forget(this);
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
            throw new LockNotHeldException(label() + ": the lease was closed", false);
        }
    }

    /**
     * Completes (normally) when the lease is lost: renewal refused (a Redlock: by a majority),
     * key deleted or taken over, lease expired. Never completes if the lease is released
     * normally. The reason is in {@link #lostReason()}, or use {@link #onLost}. Each call returns
     * a new dependent future; completing or cancelling it affects nothing else.
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

    /** Starts watching for loss once. The watch does not keep this lease reachable. */
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
}
