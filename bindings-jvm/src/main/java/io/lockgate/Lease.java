package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLease;

/**
 * Proof of holding a lock: carries the fencing token, extends, releases, and reports loss.
 * Not tied to a thread: any thread may use, extend or release it. The same class stands for a
 * mutex or read/write hold, a semaphore permit ({@link DistributedSemaphore}) and leadership
 * ({@link LeaderElection}, where the fencing token is the leader's term and releasing resigns).
 *
 * <pre>{@code
 * try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
 *     lease.onLost(reason -> cancelWork());          // optional: react if the lock slips away
 *     storage.write(data, lease.fencingToken());     // have the storage reject smaller tokens
 * }                                                  // released here
 * }</pre>
 *
 * <p>A lease can be lost while you hold it: a fixed lease expires, renewal fails for longer
 * than the lease, or the key is deleted on the server. lockgate says so rather than pretend:
 * {@link #isHeld()} turns false, {@link #lost()} completes, {@link #onLost} listeners run, and
 * {@link #close()} throws {@link LockNotHeldException}. Protect the resource itself with the
 * {@linkplain #fencingToken() fencing token}.
 *
 * <p>Always release (or close) a lease. A lease you drop without releasing is <em>not</em>
 * released when it is garbage-collected (that would end the critical section at a random
 * moment): it stays held, and renewed, until its client is closed or the JVM exits.
 */
public final class Lease extends AbstractLease implements AutoCloseable {
    private final long fencingToken;

    Lease(NativeLease lease, String name, long fencingToken, OpenLeases openLeases) {
        super(lease, name, "lock", openLeases);
        this.fencingToken = fencingToken;
    }

    /** A granted acquisition as a lease; a missing grant is a protocol failure. */
    static Lease granted(Bridge.Grant g, String name, OpenLeases openLeases) {
        if (g == null) {
            throw new LockProtocolException("the acquisition ended without a lease", false);
        }
        return new Lease(g.lease, name, g.fencingToken, openLeases);
    }

    /** Frees a grant nobody will use; the native side releases it in the background. */
    static void discard(Bridge.Grant g) {
        if (g != null) {
            discard(g.lease);
        }
    }

    /**
     * Strictly greater than every fencing token issued before for this lock name. Pass it to the
     * resource you protect and have it reject writes with a smaller token: that is what keeps a
     * paused or partitioned former holder from doing damage.
     */
    public long fencingToken() {
        return fencingToken;
    }

    @Override
    String closedUnheldMessage() {
        return label() + " (fencing token " + fencingToken + ") was no longer held when its lease was closed";
    }

    @Override
    public String toString() {
        return "Lease{name=" + name() + ", fencingToken=" + fencingToken + ", held=" + isHeld() + "}";
    }
}
