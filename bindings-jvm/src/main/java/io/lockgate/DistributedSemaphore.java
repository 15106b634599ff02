package io.lockgate;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A named distributed counting semaphore (Redis): at most {@link #permits()} holders at once.
 * Each acquisition takes one permit as a {@link Lease}, which returns by itself if its holder
 * dies (after its lease; renewed by a watchdog while the holder lives). Waiters are served in
 * arrival order and woken by the release that makes room for them, not by polling. Replaces
 * Redisson's {@code RSemaphore} / {@code RPermitExpirableSemaphore} and Curator's
 * {@code InterProcessSemaphoreV2}.
 *
 * <pre>{@code
 * DistributedSemaphore pool = client.getSemaphore("api-quota", 5);
 * try (Lease permit = pool.acquire(Duration.ofSeconds(10))) {   // LockTimeoutException after 10 s
 *     callTheApi();
 * }                                                            // the permit returns
 * }</pre>
 *
 * <p>Every client of one name must use the same permit count (the server checks it: a different
 * count is a {@link LockInvalidArgumentException}). A permit is owned by its lease, never by a
 * thread: any thread may release it. One semaphore object holds at most one permit at a time:
 * acquiring again while it holds a live permit throws {@link LockAlreadyHeldException} at once
 * (it never waits for itself); take one {@code getSemaphore(name, permits)} object per permit
 * to hold several.
 */
public final class DistributedSemaphore {
    /** The core's handle; each of its acquisitions is one permit. */
    private final DistributedLock permitHandle;
    private final int permits;

    DistributedSemaphore(DistributedLock permitHandle, int permits) {
        this.permitHandle = permitHandle;
        this.permits = permits;
    }

    /** The semaphore's name. */
    public String getName() {
        return permitHandle.getName();
    }

    /** How many holders may hold a permit at once. */
    public int permits() {
        return permits;
    }

    /** The options this semaphore was made with (the lease of each permit, default waits). */
    public LockOptions options() {
        return permitHandle.options();
    }

    /**
     * Waits up to {@code timeout} for a permit. Throws {@link LockTimeoutException} if none frees
     * up that long ({@code Duration.ZERO} tries once). Interrupting the waiting thread cancels
     * the wait on the server and throws {@link InterruptedException}.
     */
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

    /**
     * {@link #acquire(Duration)} without blocking. Cancelling the future cancels the wait; a
     * permit granted after the cancellation is returned at once.
     */
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
