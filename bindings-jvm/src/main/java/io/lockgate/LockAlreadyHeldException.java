package io.lockgate;

/**
 * The acquisition would wait for a hold its own caller already has, so it fails at once instead
 * of waiting forever: a lease acquired again through a non-reentrant handle that still holds a
 * live one; a second {@code lock()} by the holding thread of a lock built without
 * {@link LockOptions.Builder#reentrant(Boolean) reentrant(true)} (the exception the {@code Lock}
 * contract allows for "an invocation that would cause deadlock"); or a blocking call for the half
 * of a read-write lock (or the mutex) that would wait for the thread's own {@code Lock} hold.
 * Release the existing hold first, or build the lock with {@code reentrant(true)}. Code
 * {@code "ALREADY_HELD"}.
 */
public class LockAlreadyHeldException extends LockException {
    LockAlreadyHeldException(String message, boolean retryable) { super("ALREADY_HELD", message, retryable); }
}
