package io.lockgate;

/**
 * The acquisition would wait for a hold of its own handle or thread (the deadlock the
 * {@code Lock} contract lets a lock refuse), so it fails at once. Code {@code "ALREADY_HELD"}.
 */
public class LockAlreadyHeldException extends LockException {
    LockAlreadyHeldException(String message, boolean retryable) { super("ALREADY_HELD", message, retryable); }
}
