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
 * Proof of holding a lock: carries the fencing token, extends, releases, and reports loss.
 * Not tied to a thread: any thread may use, extend or release it. The same class stands for a
 * mutex or read/write hold, a semaphore permit ({@link DistributedSemaphore}) and leadership
 * ({@link LeaderElection}, where the fencing token is the leader's term and releasing resigns).
 *
 * <pre>{@code
 * try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
 *     lease.onLost(reason -> cancelWork());          // optional: react if the lock slips away
 *     storage.write(data, lease.fencingToken());     // have the storage reject smaller tokens
 * }                                                  // released here
 * }</pre>
 *
 * <p>A lease can be lost while you hold it: a fixed lease expires, renewal fails for longer
 * than the lease, or the key is deleted on the server. lockgate says so rather than pretend:
 * {@link #isHeld()} turns false, {@link #lost()} completes, {@link #onLost} listeners run, and
 * {@link #close()} throws {@link LockNotHeldException}. Protect the resource itself with the
 * {@linkplain #fencingToken() fencing token}.
 *
 * <p>Always release (or close) a lease. One that is garbage-collected unreleased is released in
 * the background eventually, but until then (with auto-renewal) the lock stays held.
 */
public final class Lease implements AutoCloseable {
    private final NativeLease lease;
    private final String name;
    private final long fencingToken;
    /** Set once this lease's owner released or closed it. */
    private final AtomicBoolean released = new AtomicBoolean();
    /** Set once closed: the native handle is freed and the final state is kept here. */
    private volatile boolean closed;
    private volatile LockException closedLossReason;
    private final AtomicBoolean watching = new AtomicBoolean();
    /** Completes with the reason once lost; stays pending if released normally. */
    private final CompletableFuture<LockException> lossReason = new CompletableFuture<>();

    Lease(NativeLease lease, String name, long fencingToken) {
        this.lease = lease;
        this.name = name;
        this.fencingToken = fencingToken;
    }

    /** A granted acquisition as a lease; a missing grant is a protocol failure. */
    static Lease granted(Bridge.Grant g, String name) {
        if (g == null) {
            throw new LockProtocolException("the acquisition ended without a lease", false);
        }
        return new Lease(g.lease, name, g.fencingToken);
    }

    /** Frees a grant nobody will use; the native side releases it in the background. */
    static void discard(Bridge.Grant g) {
        if (g != null) {
            g.lease.destroy();
        }
    }

    /** The name of the lock this lease holds. */
    public String name() {
        return name;
    }

    /**
     * Strictly greater than every fencing token issued before for this lock name. Pass it to the
     * resource you protect and have it reject writes with a smaller token: that is what keeps a
     * paused or partitioned former holder from doing damage.
     */
    public long fencingToken() {
        return fencingToken;
    }

    /** Whether the lease is certainly still held now (renewed, not expired, not lost, not released). */
    public boolean isHeld() {
        return !closed && lease.isHeld();
    }

    /** How long the lease is certainly still valid, if held. */
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
        Failure f = lease.lostReason();
        return f == null ? Optional.empty() : Optional.of(Errors.fromFailure(f));
    }

    /**
     * Sets the remaining lease to {@code duration} if still held. Never re-acquires: if the lease
     * already expired or was taken over this throws {@link LockNotHeldException} (and the lease
     * counts as lost). Blocking, bounded by the client's response timeout.
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
     * Releases the lock (only if this lease still holds it: another holder's key is never
     * touched). Returns {@code true} if it was still held, {@code false} if it had already
     * expired, been lost, or been released. Blocking, bounded by the response timeout. On a
     * failure (e.g. {@link LockConnectionException}) the lease is given up: renewal stops at once
     * and the core keeps releasing it in the background (else it expires with its lease).
     */
    public boolean release() {
        released.set(true);
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
            throw new LockNotHeldException("lock '" + name + "' (fencing token " + fencingToken
                + ") was no longer held when its lease was closed"
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
            throw new LockNotHeldException("lock '" + name + "': the lease was closed", false);
        }
    }

    /**
     * Completes (normally) when the lease is lost: renewal refused, key deleted or taken over,
     * lease expired. Never completes if the lease is released normally. The reason is in
     * {@link #lostReason()}, or use {@link #onLost}. Each call returns a new dependent future;
     * completing or cancelling it affects nothing else.
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

    @Override
    public String toString() {
        return "Lease{name=" + name + ", fencingToken=" + fencingToken + ", held=" + isHeld() + "}";
    }
}
