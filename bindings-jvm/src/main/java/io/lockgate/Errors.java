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
        switch (f.getCode()) {
            case "INVALID_ARGUMENT":
                return new LockInvalidArgumentException(m, r);
            case "TIMEOUT":
                return new LockTimeoutException(m, r);
            case "NOT_HELD":
                return new LockNotHeldException(m, r);
            case "CONNECTION":
                return new LockConnectionException(m, r);
            case "AUTHENTICATION":
                return new LockAuthenticationException(m, r);
            case "PROTOCOL":
                return new LockProtocolException(m, r);
            case "CANCELLED":
                return new LockCancelledException(m, r);
            case "CLOSED":
                return new LockClosedException(m, r);
            case "ALREADY_HELD":
                return new LockAlreadyHeldException(m, r);
            default:
                return new LockException(f.getCode(), m, r);
        }
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
        if (t instanceof NativeException.Failed) {
            LockException e = fromFailure(((NativeException.Failed) t).getFailure());
            return e;
        }
        if (t instanceof InternalException) {
            LockInternalException e = new LockInternalException(
                "lockgate native library failed internally (a bug; please report it): " + t.getMessage(), false);
            e.initCause(t);
            return e;
        }
        if (t instanceof RuntimeException) {
            return (RuntimeException) t;
        }
        if (t instanceof Error) {
            throw (Error) t;
        }
        LockInternalException e = new LockInternalException("unexpected failure: " + t, false);
        e.initCause(t);
        return e;
    }
}
