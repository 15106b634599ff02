package io.lockgate;

/** The server could not be reached or the connection broke; retryable. Code {@code "CONNECTION"}. */
public class LockConnectionException extends LockException {
    LockConnectionException(String message, boolean retryable) { super("CONNECTION", message, retryable); }
}
