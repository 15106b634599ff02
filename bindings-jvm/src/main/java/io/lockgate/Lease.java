package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.Failure;
import io.lockgate.internal.ffi.LeaseListener;
import io.lockgate.internal.ffi.NativeLease;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * Proof of holding a lock on any backend: a mutex or read/write hold, a semaphore permit, or
 * leadership (whose fencing token is the term; releasing resigns). Carries the fencing token,
 * extends, releases, reports risk and loss; not tied to a thread.
 *
 * <pre>{@code
 * try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
 *     lease.onLost(reason -> cancelWork());                      // optional: react to a loss
 *     storage.write(data, lease.fencingToken().getAsLong());     // storage rejects smaller tokens
 * }                                                              // released here
 * }</pre>
 *
 * <p>A lease lost while held (a fixed lease expired, renewal failed past the lease, the key was
 * deleted) says so: {@link #isHeld()} turns false, {@link #lost()} completes, {@link #onLost}
 * listeners run and {@link #close()} throws {@link LockNotHeldException}. Always release or
 * close a lease: one dropped unreleased is <em>not</em> released by the garbage collector (that
 * would end its critical section at a random moment) but stays held until its client closes.
 */
public final class Lease implements AutoCloseable {
    private final NativeLease lease;
    private final String name;
    /** The fencing token, or 0 where the backend gives none (tokens are at least 1). */
    private final long token;
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

    private Lease(Bridge.Grant g, String name, OpenLeases openLeases) {
        this.lease = g.lease;
        this.token = g.fencingToken;
        this.name = name;
        this.openLeases = openLeases;
        openLeases.add(this);
    }

    /** A granted acquisition as a lease; a missing grant is a protocol failure. */
    static Lease granted(Bridge.Grant g, String name, OpenLeases openLeases) {
        if (g == null) {
            throw new LockProtocolException("the acquisition ended without a lease", false);
        }
        return new Lease(g, name, openLeases);
    }

    /** A one-shot attempt's grant as a lease, if granted. */
    static Optional<Lease> ifGranted(Bridge.Grant g, String name, OpenLeases openLeases) {
        return Optional.ofNullable(g).map(x -> new Lease(x, name, openLeases));
    }

    /**
     * The name of the lock this lease holds.
     *
     * @return the lock's name
     */
    public String name() {
        return name;
    }

    /**
     * Strictly greater than every fencing token issued before for this lock name: have the
     * resource you protect reject writes with a smaller one. <b>Empty where the backend has no
     * {@code fencing}</b> ({@link LockgateClient#capabilities()}): a Redlock grant has none, as a
     * majority of independent masters is no linearizable counter (PROTOCOL.md §8); only its
     * validity ({@link #remaining()}) guards it.
     *
     * @return the grant's fencing token, or empty where the backend issues none (Redlock, memcached)
     */
    public OptionalLong fencingToken() {
        return token == 0 ? OptionalLong.empty() : OptionalLong.of(token);
    }

    /**
     * Whether the lease is certainly still held now (renewed, not expired, lost or released).
     *
     * @return whether the lease is held now, by this client's knowledge
     */
    public boolean isHeld() {
        return !closed && lease.isHeld();
    }

    /**
     * Whether the lease is held but cannot be confirmed now (its server unreachable, its session
     * disconnected, its renewals failing): it stays valid only for {@link #remaining()} unless
     * contact returns first. Finish or pause the protected work; a loss is still a loss.
     *
     * @return whether the lease is held but unconfirmed now
     */
    public boolean isAtRisk() {
        return !closed && lease.isAtRisk();
    }

    /**
     * How long the lease is certainly still valid, if held: finish the protected work within it.
     *
     * @return the time the lease is certainly still valid, or empty when it is not held
     */
    public Optional<Duration> remaining() {
        Long nanos = closed ? null : lease.remainingNanos();
        return nanos == null ? Optional.empty() : Optional.of(Duration.ofNanos(nanos));
    }

    /**
     * Why the lease was lost, if it was (usually a {@link LockNotHeldException}).
     *
     * @return the loss's reason, or empty when the lease was not lost
     */
    public Optional<LockException> lostReason() {
        return Optional.ofNullable(closed ? closedLossReason : lostReasonFromNative());
    }

    /**
     * Sets the remaining lease to {@code duration} if still held, else {@link LockNotHeldException} (never re-acquires).
     *
     * @param duration the lease's new remaining time
     */
    public void extend(Duration duration) {
        Objects.requireNonNull(duration, "duration");
        checkOpen();
        Futures.block(Bridge.extend(lease, Futures.secs(duration)));
    }

    /**
     * This lease's identity as one opaque string, for another process to
     * {@link LockgateClient#adopt(String) adopt}: it then renews, extends and releases the same
     * hold (PROTOCOL.md §17; redis-py's {@code Lock(token=...)}). Whoever has it can release the
     * lock: never log it. {@link LockNotHeldException} if the lease is no longer held;
     * {@link LockUnsupportedException} for leadership and on ZooKeeper and etcd.
     *
     * @return the lease's identity (opaque; whoever has it can release the lock)
     */
    public String identity() {
        checkOpen();
        if (released.get()) {
            throw new LockNotHeldException("the lease was released", false);
        }
        return Futures.block(Bridge.identity(lease));
    }

    /**
     * {@link #extend(Duration)} without blocking.
     *
     * @param duration the lease's new remaining time
     * @return completes when extended, or with the exception {@link #extend(Duration)} throws
     */
    public CompletableFuture<Void> extendAsync(Duration duration) {
        Objects.requireNonNull(duration, "duration");
        checkOpen();
        return Futures.async(Bridge.extend(lease, Futures.secs(duration)), v -> null);
    }

    /**
     * Releases the lock where this lease still holds it: {@code true} if it was held, {@code false}
     * if it had expired, been lost or released. Blocking. On a failure the lease is given up
     * (renewal stops; the core keeps releasing it in the background).
     *
     * @return {@code true} if the lease was still held and is now released
     */
    public boolean release() {
        released.set(true);
        openLeases.forget(this);
        if (closed) {
            return false;
        }
        try {
            return Futures.call(lease::releaseBlocking);
        } catch (RuntimeException e) {
            dispose(true);
            throw e;
        }
    }

    /**
     * {@link #release()} without blocking.
     *
     * @return completes with what {@link #release()} returns
     */
    public CompletableFuture<Boolean> releaseAsync() {
        released.set(true);
        openLeases.forget(this);
        if (closed) {
            return CompletableFuture.completedFuture(false);
        }
        return Futures.async(Bridge.release(lease), b -> b);
    }

    /**
     * Releases the lease (try-with-resources); idempotent, a no-op after {@link #release()}. A
     * lease found lost throws {@link LockNotHeldException}: the block may have run without
     * exclusivity, which must not pass silently.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        openLeases.forget(this);
        if (released.getAndSet(true)) {
            dispose(true);
            return;
        }
        boolean ended = false;
        try {
            Futures.call(() -> { // the core's scope rule: a lease lost meanwhile is NOT_HELD
                lease.endScopeBlocking();
                return null;
            });
            ended = true;
        } finally {
            // After a failure too: renewal stops, the core retries the release. Ended while held,
            // there is no loss reason to keep (and no native call to ask for one).
            dispose(!ended);
        }
    }

    /** {@code " (fencing token N)"}, or nothing where the backend gives none. */
    String tokenLabel() {
        return token == 0 ? "" : " (fencing token " + token + ")";
    }

    /** Frees the native handle (a held lease is released in the background); {@code mayBeLost}: keep the loss reason. */
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
            throw new LockNotHeldException("lock '" + name + "': the lease was closed", false);
        }
    }

    /**
     * Completes when the lease is lost (never on a normal release); each call gives a new dependent future.
     *
     * @return completes when the lease is lost
     */
    public CompletableFuture<Void> lost() {
        watch();
        return lossReason.thenApply(reason -> null);
    }

    /**
     * Runs {@code listener} with the reason once the lease is lost (at once if it was), on a lockgate thread.
     *
     * @param listener called once with the loss's reason
     */
    public void onLost(Consumer<? super LockException> listener) {
        Objects.requireNonNull(listener, "listener");
        watch();
        lossReason.thenAccept(listener);
    }

    /**
     * Runs {@code listener} once per spell at risk (at once if at risk now) until the lease ends, on a lockgate thread.
     *
     * @param listener called at the start of each spell at risk
     */
    public void onAtRisk(Runnable listener) {
        Objects.requireNonNull(listener, "listener");
        if (!closed) {
            lease.listen(new Listener(listener, new CompletableFuture<>()));
        }
    }

    /** Starts watching for loss once. The watch does not keep this lease reachable. */
    private void watch() {
        if (closed) {
            LockException reason = closedLossReason;
            if (reason != null) {
                lossReason.complete(reason);
            }
        } else if (watching.compareAndSet(false, true)) {
            lease.listen(new Listener(() -> {}, lossReason));
        }
    }

    /** Hears the native lease's spells at risk and its end (the loss completes {@code loss}); holds no lease. */
    private record Listener(Runnable onRisk, CompletableFuture<LockException> loss) implements LeaseListener {
        @Override
        public void atRisk() {
            // As onLost's thenAccept: what the listener throws stays in a dropped future, never reaches native code.
            CompletableFuture.completedFuture(null).thenRun(onRisk);
        }

        @Override
        public void ended(Failure lost) {
            if (lost != null) {
                loss.complete(Errors.fromFailure(lost));
            }
        }
    }

    @Override
    public String toString() {
        return "Lease{name=" + name + (token == 0 ? "" : ", fencingToken=" + token) + ", held=" + isHeld() + "}";
    }
}
