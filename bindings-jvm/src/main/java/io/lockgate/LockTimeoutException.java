package io.lockgate;

/** The wait for a lock ran out; retryable ({@code tryLock(time, unit)} returns {@code false} instead). Code {@code "TIMEOUT"}. */
public class LockTimeoutException extends LockException {
    LockTimeoutException(String message, boolean retryable) { super("TIMEOUT", message, retryable); }
}
