package io.lockgate;

/**
 * Base of every lockgate failure. Mirrors the core's error taxonomy: {@link #code()} is the
 * stable, language-neutral code ({@code "TIMEOUT"}, {@code "NOT_HELD"}, ...) shared with the
 * Rust, Python and Node APIs, and {@link #isRetryable()} says whether the same call may succeed
 * if simply tried again later.
 *
 * <p>One subclass per code, so callers can catch by type:
 * {@link LockInvalidArgumentException}, {@link LockTimeoutException},
 * {@link LockNotHeldException}, {@link LockConnectionException},
 * {@link LockAuthenticationException}, {@link LockProtocolException},
 * {@link LockCancelledException}, {@link LockClosedException},
 * {@link LockAlreadyHeldException}, plus
 * {@link LockInternalException} for a bug caught inside the native library. A code this
 * version does not know yet arrives as a plain {@code LockException} carrying that code.
 *
 * <p>Unchecked, because {@link java.util.concurrent.locks.Lock} allows no checked exceptions
 * but {@link InterruptedException}. Messages never contain credentials.
 */
public class LockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String code;
    private final boolean retryable;

    LockException(String code, String message, boolean retryable) {
        super(message);
        this.code = code;
        this.retryable = retryable;
    }

    /** The stable code of the failure's category, e.g. {@code "TIMEOUT"}. */
    public String code() {
        return code;
    }

    /** Whether trying the same call again later can succeed without changing anything. */
    public boolean isRetryable() {
        return retryable;
    }

    @Override
    public String toString() {
        return getClass().getName() + " [" + code + "]: " + getMessage();
    }
}
