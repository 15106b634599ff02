package io.lockgate;

/**
 * Base of every lockgate failure: {@link #code()} is the core's stable code ({@code "TIMEOUT"},
 * ...) shared with every language, {@link #isRetryable()} whether trying again may succeed. One
 * subclass per code ({@code LockTimeoutException}, ...; {@link LockInternalException} for a
 * caught native bug); a code this version does not know arrives as a plain
 * {@code LockException}. Unchecked, as {@code Lock} allows no checked exceptions; messages
 * never contain credentials.
 */
public class LockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The core's stable code, e.g. {@code "TIMEOUT"}. */
    private final String code;
    /** Whether trying the same call again later can succeed. */
    private final boolean retryable;

    LockException(String code, String message, boolean retryable) {
        super(message);
        this.code = code;
        this.retryable = retryable;
    }

    /**
     * The stable code of the failure's category, e.g. {@code "TIMEOUT"}.
     *
     * @return the code: {@code INVALID_ARGUMENT}, {@code TIMEOUT}, {@code NOT_HELD}, {@code CONNECTION}, ...
     */
    public String code() {
        return code;
    }

    /**
     * Whether trying the same call again later can succeed without changing anything.
     *
     * @return whether a retry may succeed
     */
    public boolean isRetryable() {
        return retryable;
    }

    @Override
    public String toString() {
        return getClass().getName() + " [" + code + "]: " + getMessage();
    }
}
