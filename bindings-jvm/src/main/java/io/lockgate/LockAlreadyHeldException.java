package io.lockgate;

/**
 * The acquisition would wait for a hold its own caller already has, so it fails at once instead
 * of waiting forever. Code {@code "ALREADY_HELD"}, not retryable. Thrown when
 * <ul>
 *   <li>a lease is acquired again through a non-reentrant handle ({@link DistributedLock}, either
 *       half of a {@link DistributedReadWriteLock}) that still holds a live lease;</li>
 *   <li>a thread calls {@code lock()}, {@code tryLock()} or {@code lockInterruptibly()} again on a
 *       lock built without {@link LockOptions.Builder#reentrant(Boolean) reentrant(true)} while it
 *       holds that lock through the {@link java.util.concurrent.locks.Lock} interface (the
 *       exception the {@code Lock} contract allows for "an invocation that would cause
 *       deadlock");</li>
 *   <li>a thread that holds a read or write lock through the {@code Lock} interface asks (in a
 *       blocking call) for the half of the same lock that would wait for it, or a thread holding
 *       a mutex through the {@code Lock} interface blocks in {@code acquire()} on it.</li>
 * </ul>
 * Release the existing hold first, or build the lock with {@code reentrant(true)}.
 */
public class LockAlreadyHeldException extends LockException {
    private static final long serialVersionUID = 1L;

    LockAlreadyHeldException(String message, boolean retryable) {
        super("ALREADY_HELD", message, retryable);
    }
}
