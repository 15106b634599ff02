package io.lockgate;

import io.lockgate.internal.ffi.NativeLease;

/**
 * Proof that a majority of a {@link RedlockClient}'s masters holds the lock for you: extends,
 * releases and reports loss, like {@link Lease}. Not tied to a thread.
 *
 * <pre>{@code
 * try (RedlockLease lease = lock.acquire(Duration.ofSeconds(5))) {
 *     lease.onLost(reason -> cancelWork());        // a majority refused a renewal, or it ran out
 *     workThatEndsWithin(lease.remaining().orElseThrow());
 * }                                                // released on every master
 * }</pre>
 *
 * <p><b>There is no fencing token</b>, by design (PROTOCOL.md §8, "No fencing token"): a token
 * must be strictly larger than every earlier grant's, but a majority of independent masters is
 * not a linearizable counter. The masters that saw the previous grant may be exactly the
 * minority this grant did not reach (or may have restarted and forgotten it), so any token read
 * from them could go backwards. What this lease guarantees is its validity: while
 * {@link #isHeld()} is true and within {@link #remaining()}, no other client holds a valid
 * Redlock grant of the same name, provided clock drift stays within the allowance and the
 * process is not paused past the end of the lease. Where the protected resource needs fencing,
 * use {@link LockgateClient#getLock(String)}, whose {@link Lease#fencingToken()} is strictly
 * increasing, or a consensus backend.
 *
 * <p>Loss is loud: when a renewal is refused by a majority or the validity runs out before a
 * renewal succeeded, {@link #isHeld()} turns false, {@link #lost()} completes, {@link #onLost}
 * listeners run, and {@link #close()} throws {@link LockNotHeldException}.
 *
 * <p>Always release (or close) a lease. A lease you drop without releasing is <em>not</em>
 * released when it is garbage-collected (that would end the critical section at a random
 * moment): it stays held, and renewed, until its client is closed or the JVM exits.
 */
public final class RedlockLease extends AbstractLease implements AutoCloseable {
    RedlockLease(NativeLease lease, String name, OpenLeases openLeases) {
        super(lease, name, "Redlock", openLeases);
    }

    /** A granted acquisition as a lease; a missing grant is a protocol failure. */
    static RedlockLease granted(NativeLease l, String name, OpenLeases openLeases) {
        if (l == null) {
            throw new LockProtocolException("the acquisition ended without a lease", false);
        }
        return new RedlockLease(l, name, openLeases);
    }

    @Override
    String closedUnheldMessage() {
        return label() + " was no longer held by a majority when its lease was closed";
    }

    @Override
    public String toString() {
        return "RedlockLease{name=" + name() + ", held=" + isHeld() + "}";
    }
}
