package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLock;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A named distributed mutex (Redis). Waiters are served in arrival order (fair, like Redisson's
 * {@code RFairLock}) and woken by the release itself, not by polling. Every grant carries a
 * fencing token.
 *
 * <p>Two ways to use it:
 * <ul>
 *   <li><b>Leases</b> (recommended): {@link #acquire(Duration)}, {@link #tryAcquire()} and their
 *       async variants return a {@link Lease}, the proof of holding, to use in
 *       try-with-resources. Each call is an independent acquisition.</li>
 *   <li><b>{@link java.util.concurrent.locks.Lock}</b>: {@link #lock()}, {@link #tryLock()},
 *       {@link #unlock()}... for code written against the JDK interface. Here <em>the lock
 *       object is the owner</em>, not the calling thread: {@code unlock()} may run on another
 *       thread than {@code lock()} (async code, executors), and releases the lease this object
 *       holds. Threads sharing one object exclude each other (each waits its turn on the server).
 *       It is <b>not reentrant</b>: calling {@code lock()} again while this object holds the lock
 *       waits for that hold to be unlocked (by any thread), like any other contender.</li>
 * </ul>
 *
 * <p>By default the lease is 30 s and a watchdog renews it until release; see
 * {@link LockOptions} for fixed leases and default wait limits.
 */
public final class DistributedLock implements Lock {
    private final NativeLock lock;
    private final String name;
    private final LockOptions options;
    /** The lease held through the {@link Lock} interface, if any. */
    private final AtomicReference<Lease> held = new AtomicReference<>();

    DistributedLock(NativeLock lock, String name, LockOptions options) {
        this.lock = lock;
        this.name = name;
        this.options = options;
    }

    /** The lock's name. */
    public String getName() {
        return name;
    }

    /** The options this lock was made with. */
    public LockOptions options() {
        return options;
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
        if (g == null) {
            throw new LockProtocolException("the acquisition ended without a lease", false);
        }
        return lease(g);
    }

    private Lease lease(Bridge.Grant g) {
        return new Lease(g.lease, name, g.fencingToken);
    }

    /** Frees a lease nobody will use; the native side releases it in the background. */
    private static void discard(Bridge.Grant g) {
        if (g != null) {
            g.lease.destroy();
        }
    }

    // ----------------------------------------------------------------------------- Lock

    /**
     * Acquires, waiting for the default timeout of the options (forever unless set; a set limit
     * that runs out throws {@link LockTimeoutException}). Interrupts do not stop the wait; the
     * interrupt status is restored afterwards.
     */
    @Override
    public void lock() {
        hold(wrap(Futures.uninterruptibly(() -> Bridge.acquireDefaultBlocking(lock, false))));
    }

    /**
     * Like {@link #lock()}, but an interrupt cancels the wait: the queue entry is removed from
     * the server, a grant that raced with the interrupt is released, and
     * {@link InterruptedException} is thrown.
     */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        hold(wrap(Futures.interruptibly(() -> Bridge.acquireDefaultBlocking(lock, true))));
    }

    /** One attempt without waiting: {@code true} if acquired (this object now holds it). */
    @Override
    public boolean tryLock() {
        Optional<Lease> l = tryAcquire();
        l.ifPresent(this::hold);
        return l.isPresent();
    }

    /**
     * Waits up to {@code time} (zero or negative: one attempt). {@code false} if still held by
     * someone else when the time runs out. Interruptible.
     */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        Objects.requireNonNull(unit, "unit");
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        Duration timeout = Duration.ofNanos(Math.max(0L, unit.toNanos(time)));
        try {
            hold(acquire(timeout));
            return true;
        } catch (LockTimeoutException e) {
            return false;
        }
    }

    /**
     * Releases the lease this object holds, from any thread. Throws
     * {@link IllegalMonitorStateException} if this object does not hold the lock, or if its
     * lease had already been lost (expired, deleted, taken over) before this call: in that case
     * the critical section may not have been exclusive, and the cause says why.
     */
    @Override
    public void unlock() {
        Lease l = held.getAndSet(null);
        if (l == null) {
            throw new IllegalMonitorStateException("lock '" + name + "' is not held by this lock object");
        }
        boolean wasHeld;
        try {
            wasHeld = l.release();
        } catch (RuntimeException e) {
            l.dispose(); // stops renewal now; the core retries the release in the background
            throw e;
        }
        l.dispose(!wasHeld);
        if (!wasHeld) {
            IllegalMonitorStateException e = new IllegalMonitorStateException("lock '" + name
                + "' (fencing token " + l.fencingToken() + ") had already been lost before unlock()");
            e.initCause(l.lostReason().orElseGet(
                () -> new LockNotHeldException("the lease had expired or been taken over", false)));
            throw e;
        }
    }

    /** Not supported: a {@link Condition} needs a monitor in this JVM, but the holder may be another process. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("lockgate's DistributedLock does not support conditions: a Condition"
            + " waits on a monitor in this JVM, but the lock's holder can be another process. Signal through your"
            + " own channel (a queue, a Redis pub/sub channel) and hold the lock only around the shared state.");
    }

    /** Whether this object currently holds the lock through the {@link Lock} interface (local view). */
    public boolean isHeldByThisLock() {
        Lease l = held.get();
        return l != null && l.isHeld();
    }

    /** The lease held through the {@link Lock} interface, if any (for its fencing token or loss signal). */
    public Optional<Lease> currentLease() {
        return Optional.ofNullable(held.get());
    }

    private void hold(Lease lease) {
        Lease stale = held.getAndSet(lease);
        if (stale != null) {
            // A previous hold that was never unlocked and has since been lost (otherwise this
            // acquisition could not have succeeded): drop it quietly, its lock is gone.
            stale.dispose();
        }
    }

    @Override
    public String toString() {
        return "DistributedLock{name=" + name + ", heldByThisLock=" + isHeldByThisLock() + "}";
    }
}
