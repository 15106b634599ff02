package io.lockgate;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The leases a client granted that nobody has released or closed yet, kept reachable on purpose.
 *
 * <p>Why: a lease whose Java object became unreachable would otherwise be freed by the garbage
 * collector's cleaner, and freeing the native lease releases the lock. A caller who ignored the
 * result of {@code acquire()} (or lost the reference) would then see the lock silently released
 * at some unpredictable moment while still running the critical section. Here the lease stays
 * held (and renewed) until it is released or closed, its client is closed, or the process exits
 * (which closes every client, see {@link ExitCleanup}), as with Redisson and Curator.
 *
 * <p>Leases that are no longer held (expired fixed leases, lost ones) have nothing left to
 * protect: they are dropped from time to time (whenever the set doubled since the last sweep),
 * so callers that let fixed leases expire on purpose do not grow it without bound.
 */
final class OpenLeases {
    /** Smallest size at which a sweep runs. */
    private static final int MIN_SWEEP = 64;

    private final Set<AbstractLease> open = ConcurrentHashMap.newKeySet();
    private volatile int sweepAt = MIN_SWEEP;

    /** Keeps {@code lease} reachable until {@link #forget}. */
    void add(AbstractLease lease) {
        open.add(lease);
        if (open.size() >= sweepAt) {
            sweep();
        }
    }

    /** The lease was released or closed: the collector may free it now. */
    void forget(AbstractLease lease) {
        open.remove(lease);
    }

    /** Forgets every lease (their client is closed, which released them). */
    void clear() {
        open.clear();
    }

    /** How many leases are kept (for tests). */
    int size() {
        return open.size();
    }

    private synchronized void sweep() {
        if (open.size() < sweepAt) {
            return; // another thread swept meanwhile
        }
        open.removeIf(OpenLeases::finished);
        sweepAt = Math.max(MIN_SWEEP, open.size() * 2);
    }

    private static boolean finished(AbstractLease l) {
        try {
            return !l.isHeld();
        } catch (RuntimeException closedMeanwhile) {
            return true; // closed by its owner while the sweep ran: it forgets itself anyway
        }
    }
}
