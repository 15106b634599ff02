package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeElection;
import io.lockgate.internal.ffi.NativeLeader;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A named leader election (backends with {@code election}): one leader at a time, candidates
 * queued in arrival order, the leader {@linkplain #observe() observable}. Replaces Curator's
 * {@code LeaderLatch} / {@code LeaderSelector}.
 *
 * <pre>{@code
 * LeaderElection election = client.getElection("scheduler");
 * try (Lease leadership = election.campaign("node-7:8080")) {   // waits until elected
 *     leadership.onLost(reason -> stopLeading());                // leadership slipped away
 *     runScheduler(leadership.fencingToken().getAsLong());      // the term fences writes
 * }                                                             // resigns
 * election.observe().ifPresent(l -> System.out.println(l.value() + " leads, term " + l.term()));
 * }</pre>
 *
 * <p>Leadership is a {@link Lease}: its fencing token is the term, the watchdog renews it (a
 * crashed leader is replaced within one lease), its loss is signalled like any lease's, and
 * closing it resigns, handing over to the next candidate.
 */
public final class LeaderElection {
    private final NativeElection election;
    private final String name;
    private final LockOptions options;
    private final OpenLeases openLeases;

    LeaderElection(NativeElection election, String name, LockOptions options, OpenLeases openLeases) {
        this.election = election;
        this.name = name;
        this.options = options;
        this.openLeases = openLeases;
    }

    /**
     * The election's name.
     *
     * @return the election's name
     */
    public String getName() {
        return name;
    }

    /**
     * The options leaderships are held with.
     *
     * @return the options leaderships are held with
     */
    public LockOptions options() {
        return options;
    }

    /**
     * Campaigns with {@code value} (what observers see; at most 4096 bytes of UTF-8) until elected
     * or the options' {@code waitTimeout}. An interrupt withdraws the candidacy and throws.
     *
     * @param value what observers see while this candidate leads (at most 4096 bytes of UTF-8)
     * @return the leadership: a lease whose fencing token is the term; releasing it resigns
     * @throws InterruptedException if the thread was interrupted while campaigning (the candidacy is withdrawn)
     */
    public Lease campaign(String value) throws InterruptedException {
        return Lease.granted(Futures.blockInterruptibly(campaignOp(value, null)), name, openLeases);
    }

    /**
     * Like {@link #campaign(String)} for up to {@code timeout}, else {@link LockTimeoutException}.
     *
     * @param value what observers see while this candidate leads (at most 4096 bytes of UTF-8)
     * @param timeout the longest wait ({@link Duration#ZERO}: one attempt)
     * @return the leadership: a lease whose fencing token is the term; releasing it resigns
     * @throws InterruptedException if the thread was interrupted while campaigning (the candidacy is withdrawn)
     */
    public Lease campaign(String value, Duration timeout) throws InterruptedException {
        Objects.requireNonNull(timeout, "timeout");
        return Lease.granted(Futures.blockInterruptibly(campaignOp(value, timeout)), name, openLeases);
    }

    /** The campaign for {@code timeout} ({@code null}: the options' waitTimeout, else until elected; the core decides). */
    private Bridge.Op<Bridge.Grant> campaignOp(String value, Duration timeout) {
        return Bridge.campaign(election, Objects.requireNonNull(value, "value"), Futures.secsOrNull(timeout));
    }

    /**
     * One attempt: leadership if nobody leads and no candidate is queued, else empty.
     *
     * @param value what observers see while this candidate leads (at most 4096 bytes of UTF-8)
     * @return the leadership, or empty when someone leads or queues
     */
    public Optional<Lease> tryCampaign(String value) {
        try {
            return Optional.of(Lease.granted(Futures.block(campaignOp(value, Duration.ZERO)), name, openLeases));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /**
     * {@link #campaign(String)} without blocking; cancelling withdraws the candidacy.
     *
     * @param value what observers see while this candidate leads
     * @return completes with the leadership, or with the exception {@link #campaign(String)} throws
     */
    public CompletableFuture<Lease> campaignAsync(String value) {
        return Futures.async(campaignOp(value, null), g -> Lease.granted(g, name, openLeases));
    }

    /**
     * {@link #campaign(String, Duration)} without blocking; cancelling withdraws the candidacy.
     *
     * @param value what observers see while this candidate leads
     * @param timeout the longest wait ({@link Duration#ZERO}: one attempt)
     * @return completes with the leadership, or with the exception {@link #campaign(String, Duration)} throws
     */
    public CompletableFuture<Lease> campaignAsync(String value, Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        return Futures.async(campaignOp(value, timeout), g -> Lease.granted(g, name, openLeases));
    }

    /**
     * Reads the election: the leader (a holder with its published value) and the other candidates in queue order.
     *
     * @return the election as read from the server
     */
    public LockSnapshot inspect() {
        return LockSnapshot.of(Futures.block(Bridge.inspect(election)));
    }

    /**
     * The current leader (value, term, remaining lease) as the server sees it now, if any.
     *
     * @return the current leader, or empty when nobody leads
     */
    public Optional<Leader> observe() {
        return Optional.ofNullable(Futures.block(Bridge.observe(election)))
            .map(LeaderElection::leader);
    }

    /**
     * {@link #observe()} without blocking.
     *
     * @return completes with the current leader, or empty when nobody leads
     */
    public CompletableFuture<Optional<Leader>> observeAsync() {
        return Futures.async(Bridge.observe(election), l -> Optional.ofNullable(l).map(LeaderElection::leader));
    }

    private static Leader leader(NativeLeader l) {
        return new Leader(l.getValue(), l.getTerm(), Duration.ofNanos(l.getRemainingNanos()));
    }

    @Override
    public String toString() {
        return "LeaderElection{name=" + name + "}";
    }
}
