package io.lockgate;

/** The server rejected the credentials (never retried with other ones). Code {@code "AUTHENTICATION"}. */
public class LockAuthenticationException extends LockException {
    private static final long serialVersionUID = 1L;

    LockAuthenticationException(String message, boolean retryable) {
        super("AUTHENTICATION", message, retryable);
    }
}
