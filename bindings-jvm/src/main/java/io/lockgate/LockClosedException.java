package io.lockgate;

/** The client was closed; no further operation is possible on it or its locks. Code {@code "CLOSED"}. */
public class LockClosedException extends LockException {
    LockClosedException(String message, boolean retryable) { super("CLOSED", message, retryable); }
}
