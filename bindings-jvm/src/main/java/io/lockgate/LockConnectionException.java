package io.lockgate;

/** The server could not be reached or the connection broke; retryable. Code {@code "CONNECTION"}. */
public class LockConnectionException extends LockException {
    private static final long serialVersionUID = 1L;

    LockConnectionException(String message, boolean retryable) {
        super("CONNECTION", message, retryable);
    }
}
