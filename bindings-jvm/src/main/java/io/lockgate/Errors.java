package io.lockgate;

import io.lockgate.internal.ffi.Failure;
import io.lockgate.internal.ffi.InternalException;
import io.lockgate.internal.ffi.NativeException;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** The one place where native failures become Java exceptions. */
final class Errors {
    private Errors() {}

    /** A core failure (code, message, retryable flag) as its {@link LockException} subclass. */
    static LockException fromFailure(Failure f) {
        String m = f.getMessage();
        boolean r = f.getRetryable();
        return switch (f.getCode()) {
            case "INVALID_ARGUMENT" -> new LockInvalidArgumentException(m, r);
            case "TIMEOUT" -> new LockTimeoutException(m, r);
            case "NOT_HELD" -> new LockNotHeldException(m, r);
            case "CONNECTION" -> new LockConnectionException(m, r);
            case "AUTHENTICATION" -> new LockAuthenticationException(m, r);
            case "PROTOCOL" -> new LockProtocolException(m, r);
            case "CANCELLED" -> new LockCancelledException(m, r);
            case "CLOSED" -> new LockClosedException(m, r);
            case "ALREADY_HELD" -> new LockAlreadyHeldException(m, r);
            case "UNSUPPORTED" -> new LockUnsupportedException(m, r);
            default -> new LockException(f.getCode(), m, r);
        };
    }

    /**
     * Any throwable from the native layer or a future as the exception to throw: lockgate
     * failures as {@link LockException}s, a caught native panic as {@link LockInternalException},
     * a cancelled future as {@link CancellationException}; everything else unchanged.
     */
    static RuntimeException map(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        if (t instanceof NativeException.Failed f) {
            return fromFailure(f.getFailure());
        }
        if (t instanceof InternalException) {
            LockInternalException e = new LockInternalException(
                "lockgate native library failed internally (a bug; please report it): " + t.getMessage(), false);
            e.initCause(t);
            return e;
        }
        if (t instanceof RuntimeException e) {
            return e;
        }
        if (t instanceof Error e) {
            throw e;
        }
        LockInternalException e = new LockInternalException("unexpected failure: " + t, false);
        e.initCause(t);
        return e;
    }
}
