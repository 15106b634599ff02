package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLock;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.function.Supplier;

/**
 * A named distributed mutex (Redis), or one half of a {@link DistributedReadWriteLock}. Waiters
 * are served in arrival order (fair, like Redisson's {@code RFairLock}) and woken by the release
 * itself, not by polling. Every grant carries a fencing token.
 *
 * <p>Two ways to use it, with different owners:
 * <ul>
 *   <li><b>Leases</b> (recommended, and what async code needs): {@link #acquire(Duration)},
 *       {@link #tryAcquire()} and their async variants return a {@link Lease}, the proof of
 *       holding, to use in try-with-resources. <em>The lease (and this handle) is the owner,
 *       never a thread</em>: any thread may extend or release it. Through a non-reentrant handle
 *       that still holds a live lease, a second acquisition throws
 *       {@link LockAlreadyHeldException} at once; with
 *       {@link LockOptions.Builder#reentrant(Boolean) reentrant(true)} it returns at once with
 *       the same fencing token and one more hold, and only the last release frees the lock.</li>
 *   <li><b>{@link java.util.concurrent.locks.Lock}</b>: {@link #lock()}, {@link #tryLock()},
 *       {@link #unlock()}... <em>The thread is the owner</em>, as with {@code ReentrantLock},
 *       Redisson's {@code RLock} and Curator's {@code InterProcessMutex}: the client keeps each
 *       thread's holds by lock name, other threads wait (even when they share this object),
 *       {@code unlock()} from a thread that does not hold it throws
 *       {@link IllegalMonitorStateException}, and {@code unlock()} may go through any lock object
 *       of the same client and name. A second {@code lock()} by the holding thread re-enters if
 *       the lock was built with {@code reentrant(true)} ({@link #getHoldCount()} counts) and
 *       throws {@link LockAlreadyHeldException} otherwise.</li>
 * </ul>
 *
 * <p>By default the lease is 30 s and a watchdog renews it until release; see
 * {@link LockOptions} for fixed leases and default wait limits.
 */
public final class DistributedLock extends AbstractLeaseLock<Lease> implements Lock {
    private final NativeLock lock;
    /** Makes a fresh, non-reentrant handle: each first {@code Lock}-interface hold of a thread acquires through one. */
    private final Supplier<NativeLock> freshHandles;
    /** {@code "mutex"}, {@code "read"}, {@code "write"} or {@code "semaphore"} (for toString). */
    private final String kind;
    private final OpenLeases openLeases;

    DistributedLock(NativeLock lock, Supplier<NativeLock> freshHandles, String name, LockOptions options,
                    String kind, ThreadHolds.Kind holdKind, ClientState state) {
        super(name, options, holdKind, state.threadHolds);
        this.lock = lock;
        this.freshHandles = freshHandles;
        this.kind = kind;
        this.openLeases = state.openLeases;
    }

    /**
     * Whether it re-enters (see {@link LockOptions.Builder#reentrant(Boolean)}): the lease API
     * per handle object, the {@link Lock} interface per thread.
     */
    public boolean isReentrant() {
        return options().isReentrant();
    }

    // ----------------------------------------------------------------------------- leases

    /**
     * Waits up to {@code timeout} for the lock and returns the lease. Throws
     * {@link LockTimeoutException} if it stays held that long ({@code Duration.ZERO} tries
     * once). Interrupting the waiting thread cancels the wait on the server and throws
     * {@link InterruptedException}. Throws {@link LockAlreadyHeldException} at once instead of
     * waiting for itself if this non-reentrant handle still holds a live lease, or if the
     * current thread holds this lock through the {@link Lock} interface.
     */
    public Lease acquire(Duration timeout) throws InterruptedException {
        Objects.requireNonNull(timeout, "timeout");
        checkNoSelfWait();
        double secs = Futures.secs(timeout);
        return wrap(Futures.interruptibly(() -> Bridge.acquireBlocking(lock, secs, true)));
    }

    /** Waits with the lock's default timeout ({@link LockOptions#waitTimeout()}; unset = forever). */
    public Lease acquire() throws InterruptedException {
        checkNoSelfWait();
        return wrap(Futures.interruptibly(() -> Bridge.acquireDefaultBlocking(lock, true)));
    }

    /** One attempt: the lease if acquired now, empty if someone holds it or waiters are queued. */
    public Optional<Lease> tryAcquire() {
        Bridge.Grant g = Futures.uninterruptibly(() -> Bridge.tryAcquireBlocking(lock));
        return Optional.ofNullable(g).map(this::lease);
    }

    /**
     * {@link #acquire(Duration)} without blocking. Cancelling the future cancels the wait; a
     * lease granted after the cancellation is released at once.
     */
    public CompletableFuture<Lease> acquireAsync(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        return Futures.map(Bridge.acquire(lock, Futures.secs(timeout)), this::wrap, DistributedLock::discard);
    }

    /** {@link #acquire()} without blocking. */
    public CompletableFuture<Lease> acquireAsync() {
        return Futures.map(Bridge.acquireDefault(lock), this::wrap, DistributedLock::discard);
    }

    /** {@link #tryAcquire()} without blocking. */
    public CompletableFuture<Optional<Lease>> tryAcquireAsync() {
        return Futures.map(Bridge.tryAcquire(lock), g -> Optional.ofNullable(g).map(this::lease),
            DistributedLock::discard);
    }

    private Lease wrap(Bridge.Grant g) {
        return Lease.granted(g, getName(), openLeases);
    }

    private Lease lease(Bridge.Grant g) {
        return new Lease(g.lease, getName(), g.fencingToken, openLeases);
    }

    private static void discard(Bridge.Grant g) {
        Lease.discard(g);
    }

    // ----------------------------------------------------------------------------- Lock
    // lock(), lockInterruptibly(), tryLock(), unlock(), getHoldCount()...: AbstractLeaseLock, on
    // these acquisitions, each through a fresh non-reentrant handle.

    @Override
    Lease acquireUninterruptibly() {
        return throughThreadHandle(h -> wrap(Futures.uninterruptibly(() -> Bridge.acquireDefaultBlocking(h, false))));
    }

    @Override
    Lease acquireInterruptibly() throws InterruptedException {
        return throughThreadHandle(h -> wrap(Futures.interruptibly(() -> Bridge.acquireDefaultBlocking(h, true))));
    }

    @Override
    Lease acquireWithin(Duration timeout) throws InterruptedException {
        double secs = Futures.secs(timeout);
        return throughThreadHandle(h -> wrap(Futures.interruptibly(() -> Bridge.acquireBlocking(h, secs, true))));
    }

    @Override
    Optional<Lease> acquireOnce() {
        return throughThreadHandle(h -> Optional.ofNullable(Futures.uninterruptibly(() -> Bridge.tryAcquireBlocking(h)))
            .map(this::lease));
    }

    private <T, E extends Exception> T throughThreadHandle(HandleCall<NativeLock, T, E> acquire) throws E {
        return throughFreshHandle(freshHandles, acquire);
    }

    @Override
    String lostBeforeUnlockMessage(Lease l) {
        return "lock '" + getName() + "' (fencing token " + l.fencingToken() + ") had already been lost before unlock()";
    }

    @Override
    String lostWithoutReason() {
        return "the lease had expired or been taken over";
    }

    /** Not supported: a {@link Condition} needs a monitor in this JVM, but the holder may be another process. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("lockgate's DistributedLock does not support conditions: a Condition"
            + " waits on a monitor in this JVM, but the lock's holder can be another process. Signal through your"
            + " own channel (a queue, a Redis pub/sub channel) and hold the lock only around the shared state.");
    }

    /** The current thread's lease taken through the {@link Lock} interface, if any (for its fencing token or loss signal). */
    public Optional<Lease> currentLease() {
        return Optional.ofNullable(currentHold());
    }

    @Override
    public String toString() {
        return "DistributedLock{name=" + getName() + (kind.equals("mutex") ? "" : ", kind=" + kind)
            + (isReentrant() ? ", reentrant" : "") + ", heldByCurrentThread=" + isHeldByCurrentThread() + "}";
    }
}
