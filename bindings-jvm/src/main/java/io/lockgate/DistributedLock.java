package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLock;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.function.Supplier;

/**
 * A named distributed mutex on any backend, or one half of a {@link DistributedReadWriteLock},
 * with two APIs and two owners. <b>Leases</b> ({@link #acquire(Duration)}, {@link #tryAcquire()},
 * async variants): the {@link Lease} owns the hold and may be released from any thread; a
 * non-reentrant handle refuses an acquisition by a thread that already holds a live lease through
 * it ({@link LockAlreadyHeldException}: it would wait for itself), while other threads sharing the
 * object wait their turn; a {@code reentrant(true)} one re-enters per thread. <b>{@link Lock}</b>:
 * the thread owns the hold, as with {@code ReentrantLock}: the client keeps holds per (name, kind,
 * thread), threads sharing this object exclude each other, a non-holder's {@code unlock()} throws
 * {@link IllegalMonitorStateException}, any lock object of the client and name unlocks, and the
 * holder's second {@code lock()} re-enters if reentrant, else throws
 * {@link LockAlreadyHeldException}. With {@code fifo} waiters are served in arrival order.
 */
public final class DistributedLock implements Lock {
    private final NativeLock lock;
    /** Non-reentrant handles: each first {@code Lock}-interface hold of a thread acquires through one of its own. */
    private final IdleHandles handles;
    private final String name;
    private final LockOptions options;
    /** The kind of hold, which also says what a blocking acquisition would wait for. */
    private final ThreadHolds.Kind holdKind;
    private final ThreadHolds threadHolds;
    private final OpenLeases openLeases;

    DistributedLock(NativeLock lock, Supplier<NativeLock> freshHandles, String name, LockOptions options,
                    ThreadHolds.Kind holdKind, ThreadHolds threadHolds, OpenLeases openLeases) {
        this.lock = lock;
        this.handles = new IdleHandles(freshHandles);
        this.name = name;
        this.options = options;
        this.holdKind = holdKind;
        this.threadHolds = threadHolds;
        this.openLeases = openLeases;
    }

    /**
     * The lock's name.
     *
     * @return the lock's name
     */
    public String getName() {
        return name;
    }

    /**
     * The options this lock was made with.
     *
     * @return the options this lock was made with
     */
    public LockOptions options() {
        return options;
    }

    /**
     * Whether it re-enters: the lease API per handle object, the {@link Lock} interface per thread.
     *
     * @return whether acquisitions re-enter a hold (the option {@code reentrant})
     */
    public boolean isReentrant() {
        return options.isReentrant();
    }

    // ----------------------------------------------------------------------------- leases

    /**
     * Waits up to {@code timeout} ({@code ZERO}: one attempt) for the lease, else
     * {@link LockTimeoutException}. An interrupt withdraws the wait and throws
     * {@link InterruptedException}; a wait for its own hold is {@link LockAlreadyHeldException}.
     *
     * @param timeout the longest wait ({@link Duration#ZERO}: one attempt)
     * @return the lease, holding the lock until released or lost
     * @throws InterruptedException if the thread was interrupted while waiting (the wait is withdrawn)
     */
    public Lease acquire(Duration timeout) throws InterruptedException {
        Objects.requireNonNull(timeout, "timeout");
        threadHolds.checkNoSelfWait(name, holdKind, true);
        return acquireThrough(lock, Futures.secs(timeout));
    }

    /**
     * Waits with the lock's default timeout ({@link LockOptions#waitTimeout()}; unset = forever).
     *
     * @return the lease, holding the lock until released or lost
     * @throws InterruptedException if the thread was interrupted while waiting (the wait is withdrawn)
     */
    public Lease acquire() throws InterruptedException {
        threadHolds.checkNoSelfWait(name, holdKind, true);
        return acquireThrough(lock, null);
    }

    /**
     * Reads this lock on the server, changing nothing: its holders (with this client's reentrant
     * holds) and waiters. Racy by nature: for humans and dashboards; to decide whether to write,
     * use the fencing token.
     *
     * @return the lock as read from the server
     */
    public LockSnapshot inspect() {
        return LockSnapshot.of(Futures.block(Bridge.inspect(lock)));
    }

    /**
     * Whether anyone holds this lock now, asking the server (Redisson's {@code isLocked}; racy).
     *
     * @return whether the server had a holder when asked
     */
    public boolean isLocked() {
        return inspect().isLocked();
    }

    /**
     * {@link #inspect()} without blocking.
     *
     * @return completes with the lock as read from the server
     */
    public CompletableFuture<LockSnapshot> inspectAsync() {
        return Futures.async(Bridge.inspect(lock), LockSnapshot::of);
    }

    /**
     * One attempt: the lease, or empty if held or waiters are queued (a Redlock without a quorum: {@link LockConnectionException}).
     *
     * @return the lease, or empty when the lock is held or has waiters
     */
    public Optional<Lease> tryAcquire() {
        return tryThrough(lock);
    }

    /**
     * {@link #acquire(Duration)} without blocking; cancelling the future withdraws the wait.
     *
     * @param timeout the longest wait ({@link Duration#ZERO}: one attempt)
     * @return completes with the lease, or with the exception {@link #acquire(Duration)} throws
     */
    public CompletableFuture<Lease> acquireAsync(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        return Futures.async(Bridge.acquire(lock, Futures.secs(timeout)), this::wrap);
    }

    /**
     * {@link #acquire()} without blocking.
     *
     * @return completes with the lease, or with the exception {@link #acquire()} throws
     */
    public CompletableFuture<Lease> acquireAsync() {
        return Futures.async(Bridge.acquire(lock, null), this::wrap);
    }

    /**
     * {@link #tryAcquire()} without blocking.
     *
     * @return completes with the lease, or empty when the lock is held or has waiters
     */
    public CompletableFuture<Optional<Lease>> tryAcquireAsync() {
        return Futures.async(Bridge.tryAcquire(lock), g -> Lease.ifGranted(g, name, openLeases));
    }

    private Lease wrap(Bridge.Grant g) {
        return Lease.granted(g, name, openLeases);
    }

    /** Waits through {@code h} for {@code secs} ({@code null}: the default wait); interruptible. */
    private Lease acquireThrough(NativeLock h, Double secs) throws InterruptedException {
        return wrap(Futures.callInterruptibly(() -> Bridge.acquireInterruptibly(h, secs)));
    }

    private Optional<Lease> tryThrough(NativeLock h) {
        return Lease.ifGranted(Futures.block(Bridge.tryAcquire(h)), name, openLeases);
    }

    // ----------------------------------------------------------------------------- Lock
    // Each hold here is acquired through a non-reentrant handle of its own, kept by the hold
    // until unlocked: a thread's hold must be its own acquisition, never a re-entry into another
    // thread's (the reason the Lock interface does not use this object's own, possibly reentrant,
    // handle). Handles unlocked cleanly are reused (IdleHandles).

    /** One attempt through a per-thread handle: the lease, or empty (held elsewhere). */
    private interface HandleCall<E extends Exception> {
        Optional<Lease> call(NativeLock handle) throws E;
    }

    /**
     * Makes the current thread the holder if {@code acquire}, through a per-thread handle, is
     * granted; whether it was. The handle stays with the hold; it goes back to the idle ones if the
     * attempt found the lock held, and is freed if the attempt threw.
     */
    private <E extends Exception> boolean holdThrough(HandleCall<E> acquire) throws E {
        NativeLock h = handles.take();
        Optional<Lease> lease;
        try {
            lease = acquire.call(h);
        } catch (Throwable t) {
            h.destroy();
            throw t;
        }
        if (lease.isEmpty()) {
            handles.giveBack(h);
            return false;
        }
        threadHolds.put(name, holdKind, lease.get(), h, handles);
        return true;
    }

    /**
     * Acquires for the current thread with the options' wait ({@link LockTimeoutException} when a
     * set one runs out); interrupts are restored afterwards, not obeyed. Re-entry: see the class.
     */
    @Override
    public void lock() {
        if (!reenter()) {
            holdThrough(h -> Optional.of(wrap(Futures.call(() -> Bridge.acquireBlocking(h)))));
        }
    }

    /** Like {@link #lock()}, but an interrupt withdraws the wait and throws {@link InterruptedException}. */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        if (!reenter()) {
            holdThrough(h -> Optional.of(acquireThrough(h, null)));
        }
    }

    /** One attempt without waiting: {@code true} if acquired (the current thread now holds it). Re-entry as in {@link #lock()}. */
    @Override
    public boolean tryLock() {
        if (reenter()) {
            return true;
        }
        return holdThrough(this::tryThrough);
    }

    /** Waits up to {@code time} (zero or less: one attempt); {@code false} if still held then. Interruptible. */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        Objects.requireNonNull(unit, "unit");
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        if (reenter()) {
            return true;
        }
        double secs = Futures.secs(Duration.ofNanos(Math.max(0L, unit.toNanos(time))));
        try {
            return holdThrough(h -> Optional.of(acquireThrough(h, secs)));
        } catch (LockTimeoutException e) {
            return false;
        }
    }

    /**
     * Gives back one hold of the current thread; the last releases the lock.
     * {@link IllegalMonitorStateException} if this thread does not hold it, or if its lease was
     * lost before the last unlock (the critical section may not have been exclusive; the cause
     * says why).
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
        Lease l = h.lease;
        boolean wasHeld;
        try {
            wasHeld = l.release(); // a failed release disposes of the lease itself
        } catch (RuntimeException e) {
            h.handle.destroy(); // its release goes on in the core: no other hold shares it
            throw e;
        }
        h.idle.giveBack(h.handle);
        l.dispose(!wasHeld);
        if (!wasHeld) {
            IllegalMonitorStateException e = new IllegalMonitorStateException(
                holdKind.label() + " '" + name + "'" + l.tokenLabel() + " had already been lost before unlock()");
            e.initCause(l.lostReason().orElseGet(
                () -> new LockNotHeldException("the lease had expired or been taken over", false)));
            throw e;
        }
    }

    /**
     * Whether the current thread holds this lock through the {@link Lock} interface and its lease is still held.
     *
     * @return whether this thread holds it through {@link #lock()} or {@link #tryLock()} and the lease is still held
     */
    public boolean isHeldByCurrentThread() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        return h != null && h.lease.isHeld();
    }

    /**
     * The current thread's {@link Lock}-interface holds not yet unlocked, like {@code ReentrantLock.getHoldCount()}.
     *
     * @return the number of this thread's {@link Lock}-interface holds (0 when it holds none)
     */
    public int getHoldCount() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        return h == null ? 0 : h.count;
    }

    /**
     * The current thread's lease taken through the {@link Lock} interface, if any (for its fencing token or loss signal).
     *
     * @return this thread's lease, or empty when it holds none through the {@link Lock} interface
     */
    public Optional<Lease> currentLease() {
        ThreadHolds.Hold h = threadHolds.get(name, holdKind);
        return Optional.ofNullable(h == null ? null : h.lease);
    }

    /** Counts one more hold of the current thread if it holds the lock (or throws); false if it does not. */
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

    /** Unsupported: a {@link Condition} waits on a monitor in this JVM, but the holder may be another process. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("lockgate's DistributedLock does not support conditions: a Condition"
            + " waits on a monitor in this JVM, but the lock's holder can be another process. Signal through your"
            + " own channel (a queue, a Redis pub/sub channel) and hold the lock only around the shared state.");
    }

    @Override
    public String toString() {
        return "DistributedLock{name=" + name + (holdKind == ThreadHolds.Kind.MUTEX ? "" : ", kind=" + holdKind.label())
            + (isReentrant() ? ", reentrant" : "") + ", heldByCurrentThread=" + isHeldByCurrentThread() + "}";
    }
}
