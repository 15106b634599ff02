package io.lockgate;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A named distributed counting semaphore (backends with {@code semaphore}): at most
 * {@link #permits()} holders at once, each permit a {@link Lease} that returns by itself after
 * its lease if its holder dies. Waiters are served in arrival order, woken by the release.
 * Replaces Redisson's {@code RSemaphore} and Curator's {@code InterProcessSemaphoreV2}.
 *
 * <pre>{@code
 * DistributedSemaphore pool = client.getSemaphore("api-quota", 5);
 * try (Lease permit = pool.acquire(Duration.ofSeconds(10))) {   // LockTimeoutException after 10 s
 *     callTheApi();
 * }                                                            // the permit returns
 * }</pre>
 *
 * <p>Every client of a name must use the same count (else {@link LockInvalidArgumentException}).
 * A permit is owned by its lease, never a thread. One object holds one permit at a time (another
 * acquire through it is {@link LockAlreadyHeldException}): take one object per permit held.
 */
public final class DistributedSemaphore {
    /** The core's handle; each of its acquisitions is one permit. */
    private final DistributedLock permitHandle;
    private final int permits;

    DistributedSemaphore(DistributedLock permitHandle, int permits) {
        this.permitHandle = permitHandle;
        this.permits = permits;
    }

    /**
     * Reads the semaphore on the server: its holders (permits taken) and waiters (see {@link DistributedLock#inspect()}).
     *
     * @return the semaphore as read from the server
     */
    public LockSnapshot inspect() {
        return permitHandle.inspect();
    }

    /**
     * The semaphore's name.
     *
     * @return the semaphore's name
     */
    public String getName() {
        return permitHandle.getName();
    }

    /**
     * How many holders may hold a permit at once.
     *
     * @return the permit count (the same for every client of the name)
     */
    public int permits() {
        return permits;
    }

    /**
     * The options this semaphore was made with.
     *
     * @return the options this semaphore was made with
     */
    public LockOptions options() {
        return permitHandle.options();
    }

    /**
     * Waits up to {@code timeout} for a permit, else {@link LockTimeoutException}; interruptible.
     *
     * @param timeout the longest wait ({@link Duration#ZERO}: one attempt)
     * @return the lease of one permit, until released or lost
     * @throws InterruptedException if the thread was interrupted while waiting (the wait is withdrawn)
     */
    public Lease acquire(Duration timeout) throws InterruptedException {
        return permitHandle.acquire(timeout);
    }

    /**
     * Waits with the default timeout of the options ({@link LockOptions#waitTimeout()}; unset = forever).
     *
     * @return the lease of one permit, until released or lost
     * @throws InterruptedException if the thread was interrupted while waiting (the wait is withdrawn)
     */
    public Lease acquire() throws InterruptedException {
        return permitHandle.acquire();
    }

    /**
     * One attempt: a permit if one is free now and nobody is queued, else empty.
     *
     * @return the lease of one permit, or empty when none is free or others queue
     */
    public Optional<Lease> tryAcquire() {
        return permitHandle.tryAcquire();
    }

    /**
     * Waits up to {@code timeout} (zero: one attempt); empty instead of {@link LockTimeoutException}. Interruptible.
     *
     * @param timeout the longest wait ({@link Duration#ZERO}: one attempt)
     * @return the lease of one permit, or empty when the wait ran out
     * @throws InterruptedException if the thread was interrupted while waiting (the wait is withdrawn)
     */
    public Optional<Lease> tryAcquire(Duration timeout) throws InterruptedException {
        try {
            return Optional.of(permitHandle.acquire(timeout));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /**
     * {@link #acquire(Duration)} without blocking; cancelling the future withdraws the wait.
     *
     * @param timeout the longest wait ({@link Duration#ZERO}: one attempt)
     * @return completes with the lease, or with the exception {@link #acquire(Duration)} throws
     */
    public CompletableFuture<Lease> acquireAsync(Duration timeout) {
        return permitHandle.acquireAsync(timeout);
    }

    /**
     * {@link #acquire()} without blocking.
     *
     * @return completes with the lease, or with the exception {@link #acquire()} throws
     */
    public CompletableFuture<Lease> acquireAsync() {
        return permitHandle.acquireAsync();
    }

    /**
     * {@link #tryAcquire()} without blocking.
     *
     * @return completes with the lease of one permit, or empty when none is free or others queue
     */
    public CompletableFuture<Optional<Lease>> tryAcquireAsync() {
        return permitHandle.tryAcquireAsync();
    }

    @Override
    public String toString() {
        return "DistributedSemaphore{name=" + getName() + ", permits=" + permits + "}";
    }
}
