package io.lockgate;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;

/**
 * The {@link Lock} interface on top of leases, shared by {@link DistributedLock} and
 * {@link RedlockLock}: the lock object (not the calling thread) owns the holds it takes, most
 * recent last, and {@code unlock()} releases the most recent one from any thread.
 * Package-private: the public types are the subclasses, which acquire their own kind of lease.
 *
 * @param <L> the lease a grant gives ({@link Lease} or {@link RedlockLease})
 */
abstract class AbstractLeaseLock<L extends AbstractLease> implements Lock {
    private final String name;
    private final LockOptions options;
    /** {@code "lock"} or {@code "Redlock"}, for messages. */
    private final String kind;
    /** The holds taken through the {@link Lock} interface, most recent last; guarded by itself. */
    private final Deque<L> held = new ArrayDeque<>();

    AbstractLeaseLock(String name, LockOptions options, String kind) {
        this.name = name;
        this.options = options;
        this.kind = kind;
    }

    /** Waits with the default timeout of the options; interrupts are re-asserted afterwards. */
    abstract L acquireUninterruptibly();

    /** Waits with the default timeout of the options; an interrupt cancels the wait. */
    abstract L acquireInterruptibly() throws InterruptedException;

    /** Waits up to {@code timeout}; {@link LockTimeoutException} if not acquired by then. */
    abstract L acquireWithin(Duration timeout) throws InterruptedException;

    /** One attempt. */
    abstract Optional<L> acquireOnce();

    /**
     * Whether a new hold replaces the earlier ones: where only one holder can exist (and this
     * object does not re-enter), a hold never unlocked that a new grant displaced must have been
     * lost.
     */
    abstract boolean newHoldReplacesOld();

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
     * Acquires, waiting for the default timeout of the options (forever unless set; a set limit
     * that runs out throws {@link LockTimeoutException}). Interrupts do not stop the wait; the
     * interrupt status is restored afterwards.
     */
    @Override
    public void lock() {
        hold(acquireUninterruptibly());
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
        hold(acquireInterruptibly());
    }

    /**
     * One attempt without waiting: {@code true} if acquired (this object now holds it).
     * (A Redlock's attempt throws {@link LockConnectionException} if too few masters could vote.)
     */
    @Override
    public boolean tryLock() {
        Optional<L> l = acquireOnce();
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
            hold(acquireWithin(timeout));
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
        L l;
        synchronized (held) {
            l = held.pollLast();
        }
        if (l == null) {
            throw new IllegalMonitorStateException(kind + " '" + name + "' is not held by this lock object");
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
            IllegalMonitorStateException e = new IllegalMonitorStateException(lostBeforeUnlockMessage(l));
            e.initCause(l.lostReason().orElseGet(() -> new LockNotHeldException(lostWithoutReason(), false)));
            throw e;
        }
    }

    /** Whether this object currently holds the lock through the {@link Lock} interface (local view). */
    public boolean isHeldByThisLock() {
        L l = currentHold();
        return l != null && l.isHeld();
    }

    /** The most recent lease held through the {@link Lock} interface, or {@code null}. */
    final L currentHold() {
        synchronized (held) {
            return held.peekLast();
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

    private void hold(L lease) {
        List<L> stale = new ArrayList<>();
        synchronized (held) {
            if (newHoldReplacesOld()) {
                // Previous holds that were never unlocked and have since been lost (otherwise
                // this acquisition could not have succeeded): drop them quietly, they are gone.
                stale.addAll(held);
                held.clear();
            }
            held.addLast(lease);
        }
        stale.forEach(AbstractLease::dispose);
    }
}
