package io.lockgate;

/** The operation was cancelled. Code {@code "CANCELLED"}. */
public class LockCancelledException extends LockException {
    private static final long serialVersionUID = 1L;

    LockCancelledException(String message, boolean retryable) {
        super("CANCELLED", message, retryable);
    }
}
