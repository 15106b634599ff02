package io.lockgate;

/** An argument was rejected before any network call (empty name, zero lease, bad URL...). Code {@code "INVALID_ARGUMENT"}. */
public class LockInvalidArgumentException extends LockException {
    LockInvalidArgumentException(String message, boolean retryable) { super("INVALID_ARGUMENT", message, retryable); }
}
