package io.lockgate;

/** The backend cannot do what was asked (a semaphore on a Redlock, ...; see {@link LockgateClient#capabilities()}), before any network call. Code {@code "UNSUPPORTED"}. */
public class LockUnsupportedException extends LockException {
    LockUnsupportedException(String message, boolean retryable) { super("UNSUPPORTED", message, retryable); }
}
