package io.lockgate;

import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Function;

/** Blocking and async adapters over the bridge. Errors go through {@link Errors#map}. */
final class Futures {
    private Futures() {}

    /** A call into the bridge's blocking functions (which throw the native exceptions). */
    interface Call<T> {
        T call() throws Exception;
    }

    /** Runs an interruptible blocking bridge call, mapping its errors. */
    static <T> T interruptibly(Call<T> c) throws InterruptedException {
        try {
            return c.call();
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            throw Errors.map(e);
        }
    }

    /** Runs an uninterruptible blocking bridge call (it re-asserts interrupts), mapping its errors. */
    static <T> T uninterruptibly(Call<T> c) {
        try {
            return c.call();
        } catch (Exception e) {
            throw Errors.map(e);
        }
    }

    /**
     * {@code src} mapped through {@code fn}, with errors mapped to lockgate exceptions.
     * Cancelling the result cancels {@code src}; a value {@code src} produced that never made
     * it into the result (cancelled meanwhile, or {@code fn} failed) goes to {@code abandon}.
     */
    static <A, B> CompletableFuture<B> map(CompletableFuture<A> src, Function<A, B> fn, Consumer<A> abandon) {
        CompletableFuture<B> out = new CompletableFuture<>();
        src.whenComplete((a, err) -> {
            if (err != null) {
                out.completeExceptionally(Errors.map(err));
                return;
            }
            B b;
            try {
                b = fn.apply(a);
            } catch (Throwable t) {
                if (a != null) {
                    abandon.accept(a);
                }
                out.completeExceptionally(Errors.map(t));
                return;
            }
            if (!out.complete(b) && a != null) {
                abandon.accept(a);
            }
        });
        out.whenComplete((b, err) -> {
            if (out.isCancelled()) {
                src.cancel(true);
            }
        });
        return out;
    }

    /**
     * Waits for {@code f} without reacting to interrupts (re-asserted afterwards); its failure
     * is thrown as the mapped lockgate exception.
     */
    static <T> T awaitUninterruptibly(CompletableFuture<T> f) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (java.util.concurrent.ExecutionException e) {
                    throw Errors.map(e);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Seconds as a float, the unit the native layer takes (it validates the range). */
    static double secs(java.time.Duration d) {
        return d.getSeconds() + d.getNano() / 1e9;
    }

    /** {@link #secs} of an optional setting: {@code null} (the core's default) stays {@code null}. */
    static Double secsOrNull(java.time.Duration d) {
        return d == null ? null : secs(d);
    }
}
