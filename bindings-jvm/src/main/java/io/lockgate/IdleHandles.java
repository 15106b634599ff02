package io.lockgate;

import io.lockgate.internal.ffi.NativeLock;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.function.Supplier;

/**
 * A lock object's idle per-thread handles for the {@link java.util.concurrent.locks.Lock}
 * interface, reused by the next first hold of any thread. A handle whose hold was unlocked is as
 * good as a new one (a lease's own handle acquires again after {@code close()}), while making and
 * freeing one are crossings into the core that cost {@code lock()} + {@code unlock()} about a
 * tenth of its pair on Redis (BENCHMARKS.md, "Before/after: 879ee3b vs 9bcfa25"). A handle comes
 * back only from a clean end (unlocked, or an attempt that found the lock held); after an error
 * it is freed, so a handle never carries a wait or a release still in flight into another
 * thread's hold.
 */
final class IdleHandles {
    /** The most idle handles kept (about as many threads as take turns on one lock object); more are freed. */
    private static final int MAX_IDLE = 8;

    private final Supplier<NativeLock> make;
    /** Bounded: a handle it has no room for is freed. */
    private final LinkedBlockingDeque<NativeLock> idle = new LinkedBlockingDeque<>(MAX_IDLE);

    IdleHandles(Supplier<NativeLock> make) {
        this.make = make;
    }

    /** An idle handle, else a new one. */
    NativeLock take() {
        NativeLock h = idle.pollFirst();
        return h != null ? h : make.get();
    }

    /** Takes back a handle whose hold or attempt ended cleanly (freed if enough are idle). */
    void giveBack(NativeLock h) {
        if (!idle.offerFirst(h)) {
            h.destroy();
        }
    }
}
