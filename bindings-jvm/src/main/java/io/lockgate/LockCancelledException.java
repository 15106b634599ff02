package io.lockgate;

/** The operation was cancelled. Code {@code "CANCELLED"}. */
public class LockCancelledException extends LockException {
    LockCancelledException(String message, boolean retryable) { super("CANCELLED", message, retryable); }
}
