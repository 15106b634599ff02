package io.lockgate;

/** The server rejected the credentials (never retried with other ones). Code {@code "AUTHENTICATION"}. */
public class LockAuthenticationException extends LockException {
    LockAuthenticationException(String message, boolean retryable) { super("AUTHENTICATION", message, retryable); }
}
