package io.lockgate;

import io.lockgate.internal.Bridge;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Function;

/** Blocking and async adapters over the bridge. Errors go through {@link Errors#map}. */
final class Futures {
    private Futures() {}

    /** A synchronous native call (which throws the native exceptions). */
    interface Call<T> {
        T call() throws Exception;
    }

    /** Runs a synchronous native call, mapping its errors. */
    static <T> T call(Call<T> c) {
        try {
            return c.call();
        } catch (Exception e) {
            throw Errors.map(e);
        }
    }

    /** Runs {@code op} on the calling thread; interrupts do not stop it and are re-asserted afterwards. */
    static <T> T block(Bridge.Op<T> op) {
        return call(() -> op.block(false));
    }

    /** A synchronous native call that an interrupt ends, with {@link InterruptedException}; other errors mapped. */
    static <T> T callInterruptibly(Call<T> c) throws InterruptedException {
        try {
            return c.call();
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            throw Errors.map(e);
        }
    }

    /** Runs {@code op} on the calling thread; an interrupt cancels it and throws {@link InterruptedException}. */
    static <T> T blockInterruptibly(Bridge.Op<T> op) throws InterruptedException {
        return callInterruptibly(() -> op.block(true));
    }

    /** {@code op} started without blocking, its result through {@code fn}, errors mapped; cancelling cancels the call. */
    static <A, B> CompletableFuture<B> async(Bridge.Op<A> op, Function<A, B> fn) {
        return op.async(fn, Errors::map);
    }

    /** Waits for {@code f} without reacting to interrupts ({@code join} keeps the status); failures mapped. */
    static <T> T awaitUninterruptibly(CompletableFuture<T> f) {
        try {
            return f.join();
        } catch (CompletionException e) {
            throw Errors.map(e);
        }
    }

    /** Seconds as a float, the unit the native layer takes (it validates the range). */
    static double secs(Duration d) {
        return d.getSeconds() + d.getNano() / 1e9;
    }

    /** {@link #secs} of an optional setting: {@code null} (the core's default) stays {@code null}. */
    static Double secsOrNull(Duration d) {
        return d == null ? null : secs(d);
    }
}
