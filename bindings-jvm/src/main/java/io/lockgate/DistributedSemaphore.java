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

    /** Reads the semaphore on the server: its holders (permits taken) and waiters (see {@link DistributedLock#inspect()}). */
    public LockSnapshot inspect() {
        return permitHandle.inspect();
    }

    /** The semaphore's name. */
    public String getName() {
        return permitHandle.getName();
    }

    /** How many holders may hold a permit at once. */
    public int permits() {
        return permits;
    }

    /** The options this semaphore was made with. */
    public LockOptions options() {
        return permitHandle.options();
    }

    /** Waits up to {@code timeout} for a permit, else {@link LockTimeoutException}; interruptible. */
    public Lease acquire(Duration timeout) throws InterruptedException {
        return permitHandle.acquire(timeout);
    }

    /** Waits with the default timeout of the options ({@link LockOptions#waitTimeout()}; unset = forever). */
    public Lease acquire() throws InterruptedException {
        return permitHandle.acquire();
    }

    /** One attempt: a permit if one is free now and nobody is queued, else empty. */
    public Optional<Lease> tryAcquire() {
        return permitHandle.tryAcquire();
    }

    /** Waits up to {@code timeout} (zero: one attempt); empty instead of {@link LockTimeoutException}. Interruptible. */
    public Optional<Lease> tryAcquire(Duration timeout) throws InterruptedException {
        try {
            return Optional.of(permitHandle.acquire(timeout));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /** {@link #acquire(Duration)} without blocking; cancelling the future withdraws the wait. */
    public CompletableFuture<Lease> acquireAsync(Duration timeout) {
        return permitHandle.acquireAsync(timeout);
    }

    /** {@link #acquire()} without blocking. */
    public CompletableFuture<Lease> acquireAsync() {
        return permitHandle.acquireAsync();
    }

    /** {@link #tryAcquire()} without blocking. */
    public CompletableFuture<Optional<Lease>> tryAcquireAsync() {
        return permitHandle.tryAcquireAsync();
    }

    @Override
    public String toString() {
        return "DistributedSemaphore{name=" + getName() + ", permits=" + permits + "}";
    }
}
