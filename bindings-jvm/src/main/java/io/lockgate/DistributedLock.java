package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLock;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
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
public final class DistributedLock implements Lock {
    private final NativeLock lock;
    private final String name;
    private final LockOptions options;
    /** {@code "mutex"}, {@code "read"}, {@code "write"} or {@code "semaphore"} (for toString). */
    private final String kind;
    /** Whether only one holder can hold it (mutex, write): a second hold means the first was lost. */
    private final boolean exclusive;
    /** The holds taken through the {@link Lock} interface, most recent last; guarded by itself. */
    private final Deque<Lease> held = new ArrayDeque<>();

    DistributedLock(NativeLock lock, String name, LockOptions options) {
        this(lock, name, options, "mutex", true);
    }

    DistributedLock(NativeLock lock, String name, LockOptions options, String kind, boolean exclusive) {
        this.lock = lock;
        this.name = name;
        this.options = options;
        this.kind = kind;
        this.exclusive = exclusive;
    }

    /** The lock's name. */
    public String getName() {
        return name;
    }

    /** The options this lock was made with. */
    public LockOptions options() {
        return options;
    }

    /** Whether this object re-enters while it holds the lock (see {@link LockOptions.Builder#reentrant(Boolean)}). */
    public boolean isReentrant() {
        return options.isReentrant();
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
        return Lease.granted(g, name);
    }

    private Lease lease(Bridge.Grant g) {
        return new Lease(g.lease, name, g.fencingToken);
    }

    private static void discard(Bridge.Grant g) {
        Lease.discard(g);
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
     * Releases the most recent hold of this object, from any thread (for a reentrant lock, the
     * last hold frees it). Throws {@link IllegalMonitorStateException} if this object does not
     * hold the lock, or if that lease had already been lost (expired, deleted, taken over) before
     * this call: in that case the critical section may not have been exclusive, and the cause
     * says why.
     */
    @Override
    public void unlock() {
        Lease l;
        synchronized (held) {
            l = held.pollLast();
        }
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
        Lease l = currentLease().orElse(null);
        return l != null && l.isHeld();
    }

    /** The most recent lease held through the {@link Lock} interface, if any (for its fencing token or loss signal). */
    public Optional<Lease> currentLease() {
        synchronized (held) {
            return Optional.ofNullable(held.peekLast());
        }
    }

    /**
     * How many holds this object took through the {@link Lock} interface and has not unlocked
     * yet (more than one only for a reentrant lock or a read lock shared by threads).
     */
    public int holdCount() {
        synchronized (held) {
            return held.size();
        }
    }

    private void hold(Lease lease) {
        List<Lease> stale = new ArrayList<>();
        synchronized (held) {
            if (exclusive && !isReentrant()) {
                // Previous holds that were never unlocked and have since been lost (otherwise
                // this acquisition could not have succeeded): drop them quietly, they are gone.
                stale.addAll(held);
                held.clear();
            }
            held.addLast(lease);
        }
        stale.forEach(Lease::dispose);
    }

    @Override
    public String toString() {
        return "DistributedLock{name=" + name + (kind.equals("mutex") ? "" : ", kind=" + kind)
            + (isReentrant() ? ", reentrant" : "") + ", heldByThisLock=" + isHeldByThisLock() + "}";
    }
}
