package io.lockgate;

/** A bug inside lockgate's native library (a Rust panic, caught before it could reach the JVM); please report it. Code {@code "INTERNAL"}. */
public class LockInternalException extends LockException {
    LockInternalException(String message, boolean retryable) { super("INTERNAL", message, retryable); }
}
