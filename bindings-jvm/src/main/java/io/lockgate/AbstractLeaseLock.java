package io.lockgate;

import io.lockgate.internal.ffi.Disposable;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.function.Supplier;

/**
 * The {@link Lock} interface on top of leases, shared by {@link DistributedLock} and
 * {@link RedlockLock}. Here, as everywhere in Java, <em>the thread owns the lock</em>: the holds
 * taken through this interface are kept per (client, lock name, kind, thread) in the client's
 * {@link ThreadHolds}, not in this object, so
 * <ul>
 *   <li>threads sharing one lock object exclude each other (each first hold of a thread is its
 *       own acquisition on the server, through a handle of its own);</li>
 *   <li>{@code unlock()} from a thread that does not hold the lock throws
 *       {@link IllegalMonitorStateException};</li>
 *   <li>{@code lock()} through one {@code getLock(name)} object and {@code unlock()} through
 *       another of the same client and name, on the same thread, work (Redisson's idiom);</li>
 *   <li>with {@link LockOptions.Builder#reentrant(Boolean) reentrant(true)} a thread re-enters
 *       its own hold (counted, like {@code ReentrantLock}); without it a second
 *       {@code lock()} by the holding thread throws {@link LockAlreadyHeldException} instead of
 *       waiting for itself forever.</li>
 * </ul>
 * The lease API of the same objects ({@code acquire()}, {@code Lease}) is separate and owned by
 * handle and lease, never by a thread. Package-private: the public types are the subclasses.
 *
 * @param <L> the lease a grant gives ({@link Lease} or {@link RedlockLease})
 */
abstract class AbstractLeaseLock<L extends AbstractLease> implements Lock {
    private final String name;
    private final LockOptions options;
    /** The kind of hold, which also says what a blocking acquisition would wait for. */
    private final ThreadHolds.Kind holdKind;
    private final ThreadHolds threadHolds;

    AbstractLeaseLock(String name, LockOptions options, ThreadHolds.Kind holdKind, ThreadHolds threadHolds) {
        this.name = name;
        this.options = options;
        this.holdKind = holdKind;
        this.threadHolds = threadHolds;
    }

    // Each of these acquires through a fresh, non-reentrant native handle: a thread's hold must
    // be its own acquisition, never a re-entry into another thread's (the reason the Lock
    // interface does not use this object's own, possibly reentrant, handle).

    /** Waits with the default timeout of the options; interrupts are re-asserted afterwards. */
    abstract L acquireUninterruptibly();

    /** Waits with the default timeout of the options; an interrupt cancels the wait. */
    abstract L acquireInterruptibly() throws InterruptedException;

    /** Waits up to {@code timeout}; {@link LockTimeoutException} if not acquired by then. */
    abstract L acquireWithin(Duration timeout) throws InterruptedException;

    /** One attempt. */
    abstract Optional<L> acquireOnce();

    /** One use of a native handle. */
    interface HandleCall<H, T, E extends Exception> {
        T call(H handle) throws E;
    }

    /** An acquisition through a fresh handle, freed afterwards (the lease does not need it). */
    static <H extends Disposable, T, E extends Exception> T throughFreshHandle(Supplier<H> handles,
                                                                             HandleCall<H, T, E> acquire) throws E {
        H h = handles.get();
        try {
            return acquire.call(h);
        } finally {
            h.destroy();
        }
    }

    /** The message of {@link IllegalMonitorStateException} when {@code lease} had been lost before {@code unlock()}. */
    abstract String lostBeforeUnlockMessage(L lease);

    /** The cause given with that exception when the lease knows no loss reason. */
    abstract String lostWithoutReason();

    /** The lock's name. */
    public String getName() {
        return name;
    }

    /** The options this lock was made with. */
    public LockOptions options() {
        return options;
    }

    /**
     * Before a blocking lease acquisition: fails at once if the current thread holds, through
     * the {@link Lock} interface, a hold of this lock the acquisition would wait for.
     */
    final void checkNoSelfWait() {
        threadHolds.checkNoSelfWait(name, holdKind, true);
    }

    /**
     * Acquires for the current thread, waiting for the default timeout of the options (forever
     * unless set; a set limit that runs out throws {@link LockTimeoutException}). Interrupts do
     * not stop the wait; the interrupt status is restored afterwards. If the current thread
     * already holds it: one more hold for a reentrant lock, {@link LockAlreadyHeldException}
     * otherwise.
     */
    @Override
    public void lock() {
        if (!reenter()) {
            hold(acquireUninterruptibly());
        }
    }

    /**
     * Like {@link #lock()}, but an interrupt cancels the wait: the wait is withdrawn on the
     * server, a grant that raced with the interrupt is released, and
     * {@link InterruptedException} is thrown.
     */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        if (!reenter()) {
            hold(acquireInterruptibly());
        }
    }

    /**
     * One attempt without waiting: {@code true} if acquired (the current thread now holds it).
     * Re-entry as in {@link #lock()}. (A Redlock's attempt throws {@link LockConnectionException}
     * if too few masters could vote.)
     */
    @Override
    public boolean tryLock() {
        if (reenter()) {
            return true;
        }
        Optional<L> l = acquireOnce();
        l.ifPresent(this::hold);
        return l.isPresent();
    }

    /**
     * Waits up to {@code time} (zero or negative: one attempt). {@code false} if still held by
     * someone else when the time runs out. Interruptible. Re-entry as in {@link #lock()}.
     */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        Objects.requireNonNull(unit, "unit");
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        if (reenter()) {
            return true;
        }
        Duration timeout = Duration.ofNanos(Math.max(0L, unit.toNanos(time)));
        try {
            hold(acquireWithin(timeout));
            return true;
        } catch (LockTimeoutException e) {
            return false;
        }
    }

    /**
     * Gives back one hold of the current thread; the last one releases the lock. Throws
     * {@link IllegalMonitorStateException} if the current thread does not hold it (another
     * thread's hold is never touched), or if its lease had already been lost (expired, deleted,
     * taken over) before the last unlock: then the critical section may not have been exclusive,
     * and the cause says why.
     */
    @Override
    public void unlock() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        if (h == null) {
            throw new IllegalMonitorStateException(holdKind.label() + " '" + name + "' is not held by the current thread");
        }
        if (--h.count > 0) {
            return;
        }
        threadHolds.remove(name, holdKind);
        @SuppressWarnings("unchecked")
        L l = (L) h.lease;
        boolean wasHeld;
        try {
            wasHeld = l.release();
        } catch (RuntimeException e) {
            l.dispose(); // stops renewal now; the core retries the release in the background
            throw e;
        }
        l.dispose(!wasHeld);
        if (!wasHeld) {
            IllegalMonitorStateException e = new IllegalMonitorStateException(lostBeforeUnlockMessage(l));
            e.initCause(l.lostReason().orElseGet(() -> new LockNotHeldException(lostWithoutReason(), false)));
            throw e;
        }
    }

    /** Whether the current thread holds this lock through the {@link Lock} interface and its lease is still held. */
    public boolean isHeldByCurrentThread() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        return h != null && h.lease.isHeld();
    }

    /**
     * How many holds the current thread took through the {@link Lock} interface and has not
     * unlocked yet (0 if none; more than 1 only for a reentrant lock), like
     * {@code ReentrantLock.getHoldCount()}.
     */
    public int getHoldCount() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        return h == null ? 0 : h.count;
    }

    /** The current thread's lease taken through the {@link Lock} interface, or {@code null}. */
    @SuppressWarnings("unchecked")
    final L currentHold() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        return h == null ? null : (L) h.lease;
    }

    /**
     * If the current thread already holds this lock: counts one more hold and returns
     * {@code true} (reentrant), or throws. Otherwise checks that a new acquisition would not wait
     * for another hold of this thread, and returns {@code false}.
     */
    private boolean reenter() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        if (h == null) {
            threadHolds.checkNoSelfWait(name, holdKind, false);
            return false;
        }
        if (!h.lease.isHeld()) {
            LockNotHeldException e = new LockNotHeldException(holdKind.label() + " '" + name
                + "' was lost while the current thread held it; unlock() it first", false);
            h.lease.lostReason().ifPresent(e::initCause);
            throw e;
        }
        if (!options.isReentrant()) {
            throw new LockAlreadyHeldException("the current thread already holds " + holdKind.label() + " '" + name
                + "', which is not reentrant (build it with LockOptions.builder().reentrant(true) to re-enter)", false);
        }
        if (h.count == Integer.MAX_VALUE) {
            throw new Error("maximum lock count exceeded"); // as ReentrantLock does
        }
        h.count++;
        return true;
    }

    private void hold(L lease) {
        threadHolds.put(name, holdKind, lease);
    }
}
