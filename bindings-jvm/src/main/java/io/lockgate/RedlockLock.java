package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeRedlockLease;
import io.lockgate.internal.ffi.NativeRedlockLock;
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
 * A named lock held on a majority of a {@link RedlockClient}'s independent masters. Used like
 * {@link DistributedLock}: leases ({@link #acquire(Duration)}, {@link #tryAcquire()}, async
 * variants) or the {@link java.util.concurrent.locks.Lock} interface, where the lock object,
 * not the calling thread, is the owner ({@code unlock()} may run on another thread).
 *
 * <p>Differences from the mutex: a grant is a {@link RedlockLease} <b>without a fencing
 * token</b> (PROTOCOL.md §8), waiting is by retrying after a jittered pause rather than in a
 * fair queue, and it is never reentrant. {@link #tryAcquire()} makes one attempt: empty if the
 * lock is held, a {@link LockConnectionException} (retryable) if too few masters could vote.
 */
public final class RedlockLock implements Lock {
    private final NativeRedlockLock lock;
    private final String name;
    private final LockOptions options;
    /** The holds taken through the {@link Lock} interface, most recent last; guarded by itself. */
    private final Deque<RedlockLease> held = new ArrayDeque<>();

    RedlockLock(NativeRedlockLock lock, String name, LockOptions options) {
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
     * Tries for up to {@code timeout} (attempts spaced by the retry delay plus jitter) and returns
     * the lease. Throws {@link LockTimeoutException}, saying why the last attempt failed, if no
     * majority could be had that long ({@code Duration.ZERO} tries once). Interrupting the waiting
     * thread cancels the wait (whatever the last attempt set on the masters is undone) and throws
     * {@link InterruptedException}.
     */
    public RedlockLease acquire(Duration timeout) throws InterruptedException {
        Objects.requireNonNull(timeout, "timeout");
        double secs = Futures.secs(timeout);
        return wrap(Futures.interruptibly(() -> Bridge.redlockAcquireBlocking(lock, secs, true)));
    }

    /** Waits with the lock's default timeout ({@link LockOptions#waitTimeout()}; unset = forever). */
    public RedlockLease acquire() throws InterruptedException {
        return wrap(Futures.interruptibly(() -> Bridge.redlockAcquireDefaultBlocking(lock, true)));
    }

    /**
     * One attempt: the lease if a majority granted it now, empty if the lock is held. Throws
     * {@link LockConnectionException} (retryable) if too few masters could vote (down, slow,
     * recently restarted), naming how many granted, refused, were restarting or failed.
     */
    public Optional<RedlockLease> tryAcquire() {
        NativeRedlockLease l = Futures.uninterruptibly(() -> Bridge.redlockTryAcquireBlocking(lock));
        return Optional.ofNullable(l).map(this::lease);
    }

    /**
     * {@link #acquire(Duration)} without blocking. Cancelling the future cancels the wait; a
     * lease granted after the cancellation is released at once.
     */
    public CompletableFuture<RedlockLease> acquireAsync(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        return Futures.map(Bridge.redlockAcquire(lock, Futures.secs(timeout)), this::wrap, RedlockLease::discard);
    }

    /** {@link #acquire()} without blocking. */
    public CompletableFuture<RedlockLease> acquireAsync() {
        return Futures.map(Bridge.redlockAcquireDefault(lock), this::wrap, RedlockLease::discard);
    }

    /** {@link #tryAcquire()} without blocking. */
    public CompletableFuture<Optional<RedlockLease>> tryAcquireAsync() {
        return Futures.map(Bridge.redlockTryAcquire(lock), l -> Optional.ofNullable(l).map(this::lease),
            RedlockLease::discard);
    }

    private RedlockLease wrap(NativeRedlockLease l) {
        return RedlockLease.granted(l, name);
    }

    private RedlockLease lease(NativeRedlockLease l) {
        return new RedlockLease(l, name);
    }

    // ----------------------------------------------------------------------------- Lock

    /**
     * Acquires, waiting for the default timeout of the options (forever unless set; a set limit
     * that runs out throws {@link LockTimeoutException}). Interrupts do not stop the wait; the
     * interrupt status is restored afterwards.
     */
    @Override
    public void lock() {
        hold(wrap(Futures.uninterruptibly(() -> Bridge.redlockAcquireDefaultBlocking(lock, false))));
    }

    /** Like {@link #lock()}, but an interrupt cancels the wait and throws {@link InterruptedException}. */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        hold(wrap(Futures.interruptibly(() -> Bridge.redlockAcquireDefaultBlocking(lock, true))));
    }

    /**
     * One attempt: {@code true} if acquired (this object now holds it), {@code false} if held
     * elsewhere. Too few reachable masters throw {@link LockConnectionException}, as in
     * {@link #tryAcquire()}.
     */
    @Override
    public boolean tryLock() {
        Optional<RedlockLease> l = tryAcquire();
        l.ifPresent(this::hold);
        return l.isPresent();
    }

    /**
     * Tries for up to {@code time} (zero or negative: one attempt). {@code false} if no majority
     * could be had by then. Interruptible.
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
     * Releases the most recent hold of this object, from any thread. Throws
     * {@link IllegalMonitorStateException} if this object does not hold the lock, or if that
     * lease had already been lost before this call (the critical section may not have been
     * exclusive; the cause says why).
     */
    @Override
    public void unlock() {
        RedlockLease l;
        synchronized (held) {
            l = held.pollLast();
        }
        if (l == null) {
            throw new IllegalMonitorStateException("Redlock '" + name + "' is not held by this lock object");
        }
        boolean wasHeld;
        try {
            wasHeld = l.release();
        } catch (RuntimeException e) {
            l.dispose();
            throw e;
        }
        l.dispose(!wasHeld);
        if (!wasHeld) {
            IllegalMonitorStateException e = new IllegalMonitorStateException(
                "Redlock '" + name + "' had already been lost before unlock()");
            e.initCause(l.lostReason().orElseGet(
                () -> new LockNotHeldException("the lease had expired on too many masters", false)));
            throw e;
        }
    }

    /** Not supported: the holder may be another process (see {@link DistributedLock#newCondition()}). */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("lockgate's RedlockLock does not support conditions: a Condition"
            + " waits on a monitor in this JVM, but the lock's holder can be another process. Signal through your"
            + " own channel and hold the lock only around the shared state.");
    }

    /** Whether this object currently holds the lock through the {@link Lock} interface (local view). */
    public boolean isHeldByThisLock() {
        RedlockLease l = currentLease().orElse(null);
        return l != null && l.isHeld();
    }

    /** The most recent lease held through the {@link Lock} interface, if any (for its validity or loss signal). */
    public Optional<RedlockLease> currentLease() {
        synchronized (held) {
            return Optional.ofNullable(held.peekLast());
        }
    }

    /** How many holds this object took through the {@link Lock} interface and has not unlocked (0 or 1). */
    public int holdCount() {
        synchronized (held) {
            return held.size();
        }
    }

    private void hold(RedlockLease lease) {
        List<RedlockLease> stale;
        synchronized (held) {
            // Earlier holds never unlocked must have been lost (else this grant could not have
            // happened): drop them quietly.
            stale = new ArrayList<>(held);
            held.clear();
            held.addLast(lease);
        }
        stale.forEach(RedlockLease::dispose);
    }

    @Override
    public String toString() {
        return "RedlockLock{name=" + name + ", heldByThisLock=" + isHeldByThisLock() + "}";
    }
}
