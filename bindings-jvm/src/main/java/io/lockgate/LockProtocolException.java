package io.lockgate;

/** The server replied with something the protocol does not allow (e.g. a key of the wrong type under the lock's name). Code {@code "PROTOCOL"}. */
public class LockProtocolException extends LockException {
    LockProtocolException(String message, boolean retryable) { super("PROTOCOL", message, retryable); }
}
