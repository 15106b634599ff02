package io.lockgate;

/** A bug inside lockgate's native library (a Rust panic, caught before it could reach the JVM). Not part of the core's taxonomy; please report it. Code {@code "INTERNAL"}. */
public class LockInternalException extends LockException {
    private static final long serialVersionUID = 1L;

    LockInternalException(String message, boolean retryable) {
        super("INTERNAL", message, retryable);
    }
}
