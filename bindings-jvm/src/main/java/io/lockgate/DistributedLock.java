package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLock;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A named distributed mutex (Redis), or one half of a {@link DistributedReadWriteLock}. Waiters
 * are served in arrival order (fair, like Redisson's {@code RFairLock}) and woken by the release
 * itself, not by polling. Every grant carries a fencing token.
 *
 * <p>Two ways to use it:
 * <ul>
 *   <li><b>Leases</b> (recommended): {@link #acquire(Duration)}, {@link #tryAcquire()} and their
 *       async variants return a {@link Lease}, the proof of holding, to use in
 *       try-with-resources. Each call is an independent acquisition.</li>
 *   <li><b>{@link java.util.concurrent.locks.Lock}</b>: {@link #lock()}, {@link #tryLock()},
 *       {@link #unlock()}... for code written against the JDK interface. Here <em>the lock
 *       object is the owner</em>, not the calling thread: {@code unlock()} may run on another
 *       thread than {@code lock()} (async code, executors), and releases the most recent hold
 *       of this object. Threads sharing one mutex object exclude each other (each waits its turn
 *       on the server); threads sharing one read lock object hold it together.</li>
 * </ul>
 *
 * <p>By default it is <b>not reentrant</b>: calling {@code lock()} or {@code acquire()} again
 * while this object holds the lock waits for that hold to be released (by any thread), like any
 * other contender. With {@link LockOptions.Builder#reentrant(Boolean) reentrant(true)} the
 * object (not the thread) re-enters: a second acquisition while it holds returns at once with
 * the same fencing token and one more hold, and only the last {@code unlock()} or
 * {@link Lease#release()} frees the lock ({@link #holdCount()} counts the {@code Lock}-style
 * holds).
 *
 * <p>By default the lease is 30 s and a watchdog renews it until release; see
 * {@link LockOptions} for fixed leases and default wait limits.
 */
public final class DistributedLock extends AbstractLeaseLock<Lease> implements Lock {
    private final NativeLock lock;
    /** {@code "mutex"}, {@code "read"}, {@code "write"} or {@code "semaphore"} (for toString). */
    private final String kind;
    /** Whether only one holder can hold it (mutex, write): a second hold means the first was lost. */
    private final boolean exclusive;

    DistributedLock(NativeLock lock, String name, LockOptions options) {
        this(lock, name, options, "mutex", true);
    }

    DistributedLock(NativeLock lock, String name, LockOptions options, String kind, boolean exclusive) {
        super(name, options, "lock");
        this.lock = lock;
        this.kind = kind;
        this.exclusive = exclusive;
    }

    /** Whether this object re-enters while it holds the lock (see {@link LockOptions.Builder#reentrant(Boolean)}). */
    public boolean isReentrant() {
        return options().isReentrant();
    }

    // ----------------------------------------------------------------------------- leases

    /**
     * Waits up to {@code timeout} for the lock and returns the lease. Throws
     * {@link LockTimeoutException} if it stays held that long ({@code Duration.ZERO} tries
     * once). Interrupting the waiting thread cancels the wait on the server and throws
     * {@link InterruptedException}.
     */
    public Lease acquire(Duration timeout) throws InterruptedException {
        Objects.requireNonNull(timeout, "timeout");
        double secs = Futures.secs(timeout);
        return wrap(Futures.interruptibly(() -> Bridge.acquireBlocking(lock, secs, true)));
    }

    /** Waits with the lock's default timeout ({@link LockOptions#waitTimeout()}; unset = forever). */
    public Lease acquire() throws InterruptedException {
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
        return Futures.map(Bridge.tryAcquire(lock), g -> Optional.ofNullable(g).map(this::lease), DistributedLock::discard);
    }

    private Lease wrap(Bridge.Grant g) {
        return Lease.granted(g, getName());
    }

    private Lease lease(Bridge.Grant g) {
        return new Lease(g.lease, getName(), g.fencingToken);
    }

    private static void discard(Bridge.Grant g) {
        Lease.discard(g);
    }

    // ----------------------------------------------------------------------------- Lock
    // lock(), lockInterruptibly(), tryLock(), unlock(), holdCount()...: AbstractLeaseLock, on
    // these acquisitions.

    @Override
    Lease acquireUninterruptibly() {
        return wrap(Futures.uninterruptibly(() -> Bridge.acquireDefaultBlocking(lock, false)));
    }

    @Override
    Lease acquireInterruptibly() throws InterruptedException {
        return acquire();
    }

    @Override
    Lease acquireWithin(Duration timeout) throws InterruptedException {
        return acquire(timeout);
    }

    @Override
    Optional<Lease> acquireOnce() {
        return tryAcquire();
    }

    @Override
    boolean newHoldReplacesOld() {
        return exclusive && !isReentrant();
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

    /** The most recent lease held through the {@link Lock} interface, if any (for its fencing token or loss signal). */
    public Optional<Lease> currentLease() {
        return Optional.ofNullable(currentHold());
    }

    @Override
    public String toString() {
        return "DistributedLock{name=" + getName() + (kind.equals("mutex") ? "" : ", kind=" + kind)
            + (isReentrant() ? ", reentrant" : "") + ", heldByThisLock=" + isHeldByThisLock() + "}";
    }
}
