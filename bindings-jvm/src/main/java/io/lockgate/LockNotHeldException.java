package io.lockgate;

/** The lease is not (or no longer) held: it expired, was deleted or taken over, or was released. Code {@code "NOT_HELD"}. */
public class LockNotHeldException extends LockException {
    LockNotHeldException(String message, boolean retryable) { super("NOT_HELD", message, retryable); }
}
