package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLease;
import io.lockgate.internal.ffi.NativeRedlockLock;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.function.Supplier;

/**
 * A named lock held on a majority of a {@link RedlockClient}'s independent masters. Used like
 * {@link DistributedLock}: leases ({@link #acquire(Duration)}, {@link #tryAcquire()}, async
 * variants), owned by the lease and never by a thread, or the
 * {@link java.util.concurrent.locks.Lock} interface, owned by the calling thread (kept per
 * client, name and thread: other threads wait, {@code unlock()} from another thread throws
 * {@link IllegalMonitorStateException}, a second {@code lock()} by the holder throws
 * {@link LockAlreadyHeldException} since a Redlock is never reentrant).
 *
 * <p>Differences from the mutex: a grant is a {@link RedlockLease} <b>without a fencing
 * token</b> (PROTOCOL.md §8), waiting is by retrying after a jittered pause rather than in a
 * fair queue, and it is never reentrant. {@link #tryAcquire()} makes one attempt: empty if the
 * lock is held, a {@link LockConnectionException} (retryable) if too few masters could vote.
 */
public final class RedlockLock extends AbstractLeaseLock<RedlockLease> implements Lock {
    private final NativeRedlockLock lock;
    /** Makes the fresh handle each first {@code Lock}-interface hold of a thread acquires through. */
    private final Supplier<NativeRedlockLock> threadHandles;
    private final OpenLeases openLeases;

    RedlockLock(NativeRedlockLock lock, Supplier<NativeRedlockLock> threadHandles, String name, LockOptions options,
                ClientState state) {
        super(name, options, ThreadHolds.Kind.REDLOCK, state.threadHolds);
        this.lock = lock;
        this.threadHandles = threadHandles;
        this.openLeases = state.openLeases;
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
        checkNoSelfWait();
        double secs = Futures.secs(timeout);
        return wrap(Futures.interruptibly(() -> Bridge.redlockAcquireBlocking(lock, secs, true)));
    }

    /** Waits with the lock's default timeout ({@link LockOptions#waitTimeout()}; unset = forever). */
    public RedlockLease acquire() throws InterruptedException {
        checkNoSelfWait();
        return wrap(Futures.interruptibly(() -> Bridge.redlockAcquireDefaultBlocking(lock, true)));
    }

    /**
     * One attempt: the lease if a majority granted it now, empty if the lock is held. Throws
     * {@link LockConnectionException} (retryable) if too few masters could vote (down, slow,
     * recently restarted), naming how many granted, refused, were restarting or failed.
     */
    public Optional<RedlockLease> tryAcquire() {
        NativeLease l = Futures.uninterruptibly(() -> Bridge.redlockTryAcquireBlocking(lock));
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

    private RedlockLease wrap(NativeLease l) {
        return RedlockLease.granted(l, getName(), openLeases);
    }

    private RedlockLease lease(NativeLease l) {
        return new RedlockLease(l, getName(), openLeases);
    }

    // ----------------------------------------------------------------------------- Lock
    // lock(), lockInterruptibly(), tryLock() (one attempt: too few reachable masters throw
    // LockConnectionException, as in tryAcquire()), unlock(), getHoldCount() (0 or 1)...:
    // AbstractLeaseLock, on these acquisitions, each through a fresh handle.

    @Override
    RedlockLease acquireUninterruptibly() {
        return throughFreshHandle(threadHandles,
            h -> wrap(Futures.uninterruptibly(() -> Bridge.redlockAcquireDefaultBlocking(h, false))));
    }

    @Override
    RedlockLease acquireInterruptibly() throws InterruptedException {
        return throughFreshHandle(threadHandles,
            h -> wrap(Futures.interruptibly(() -> Bridge.redlockAcquireDefaultBlocking(h, true))));
    }

    @Override
    RedlockLease acquireWithin(Duration timeout) throws InterruptedException {
        double secs = Futures.secs(timeout);
        return throughFreshHandle(threadHandles,
            h -> wrap(Futures.interruptibly(() -> Bridge.redlockAcquireBlocking(h, secs, true))));
    }

    @Override
    Optional<RedlockLease> acquireOnce() {
        return throughFreshHandle(threadHandles,
            h -> Optional.ofNullable(Futures.uninterruptibly(() -> Bridge.redlockTryAcquireBlocking(h))).map(this::lease));
    }

    @Override
    String lostBeforeUnlockMessage(RedlockLease l) {
        return "Redlock '" + getName() + "' had already been lost before unlock()";
    }

    @Override
    String lostWithoutReason() {
        return "the lease had expired on too many masters";
    }

    /** Not supported: the holder may be another process (see {@link DistributedLock#newCondition()}). */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("lockgate's RedlockLock does not support conditions: a Condition"
            + " waits on a monitor in this JVM, but the lock's holder can be another process. Signal through your"
            + " own channel and hold the lock only around the shared state.");
    }

    /** The current thread's lease taken through the {@link Lock} interface, if any (for its validity or loss signal). */
    public Optional<RedlockLease> currentLease() {
        return Optional.ofNullable(currentHold());
    }

    @Override
    public String toString() {
        return "RedlockLock{name=" + getName() + ", heldByCurrentThread=" + isHeldByCurrentThread() + "}";
    }
}
