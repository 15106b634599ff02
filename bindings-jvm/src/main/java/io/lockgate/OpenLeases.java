package io.lockgate;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The leases a client granted that nobody released or closed yet, kept reachable on purpose:
 * the garbage collector's cleaner would free an unreachable one, and freeing a native lease
 * releases the lock, silently, at a random moment of a critical section whose holder merely
 * dropped the reference. Leases no longer held are swept out whenever the set doubled.
 */
final class OpenLeases {
    /** Smallest size at which a sweep runs. */
    private static final int MIN_SWEEP = 64;

    private final Set<Lease> open = ConcurrentHashMap.newKeySet();
    private volatile int sweepAt = MIN_SWEEP;

    /** Keeps {@code lease} reachable until {@link #forget}. */
    void add(Lease lease) {
        open.add(lease);
        if (open.size() >= sweepAt) {
            sweep();
        }
    }

    /** The lease was released or closed: the collector may free it now. */
    void forget(Lease lease) {
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

    private static boolean finished(Lease l) {
        try {
            return !l.isHeld();
        } catch (RuntimeException closedMeanwhile) {
            return true; // closed by its owner while the sweep ran: it forgets itself anyway
        }
    }
}
