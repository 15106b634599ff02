package io.lockgate;

/** The wait for a lock ran out; retryable. ({@link DistributedLock#tryLock(long, java.util.concurrent.TimeUnit)} returns {@code false} instead.) Code {@code "TIMEOUT"}. */
public class LockTimeoutException extends LockException {
    private static final long serialVersionUID = 1L;

    LockTimeoutException(String message, boolean retryable) {
        super("TIMEOUT", message, retryable);
    }
}
