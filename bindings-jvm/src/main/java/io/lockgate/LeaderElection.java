package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeElection;
import io.lockgate.internal.ffi.NativeLeader;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A named leader election (Redis): at most one leader at a time, candidates queued in arrival
 * order, and anyone can {@linkplain #observe() observe} the current leader. Replaces Curator's
 * {@code LeaderLatch} / {@code LeaderSelector}.
 *
 * <pre>{@code
 * LeaderElection election = client.getElection("scheduler");
 * try (Lease leadership = election.campaign("node-7:8080")) {   // waits until elected
 *     leadership.onLost(reason -> stopLeading());                // leadership slipped away
 *     runSchedulerUntilShutdown(leadership.fencingToken());      // the term fences writes
 * }                                                             // resigns
 * election.observe().ifPresent(l -> System.out.println(l.value() + " leads, term " + l.term()));
 * }</pre>
 *
 * <p>Leadership is a {@link Lease}: its {@linkplain Lease#fencingToken() fencing token} is the
 * term (strictly larger for every later leader), the watchdog renews it while the process lives
 * (so a crashed leader is replaced within one lease, see {@link LockOptions}), losing it is
 * signalled like any lease loss ({@link Lease#onLost}, {@link Lease#lost()}), and
 * {@link Lease#close()} / {@link Lease#release()} resigns, handing over to the next candidate.
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

    /** The election's name. */
    public String getName() {
        return name;
    }

    /** The options leaderships are held with. */
    public LockOptions options() {
        return options;
    }

    /**
     * Campaigns and waits to become leader, up to the default wait of the options
     * ({@link LockOptions#waitTimeout()}; unset = until elected). {@code value} (at most 4096
     * bytes of UTF-8, else {@link LockInvalidArgumentException}) is what observers see while this
     * candidate leads. Interrupting the waiting thread withdraws the candidacy and throws
     * {@link InterruptedException}.
     */
    public Lease campaign(String value) throws InterruptedException {
        return campaignFor(value, options.waitTimeout().orElse(null));
    }

    /**
     * Like {@link #campaign(String)}, waiting up to {@code timeout}: throws
     * {@link LockTimeoutException} if another candidate stays leader that long
     * ({@code Duration.ZERO} tries once).
     */
    public Lease campaign(String value, Duration timeout) throws InterruptedException {
        Objects.requireNonNull(timeout, "timeout");
        return campaignFor(value, timeout);
    }

    private Lease campaignFor(String value, Duration timeout) throws InterruptedException {
        Objects.requireNonNull(value, "value");
        Double secs = timeout == null ? null : Futures.secs(timeout);
        return Lease.granted(Futures.interruptibly(() -> Bridge.campaignBlocking(election, value, secs, true)), name,
            openLeases);
    }

    /** One attempt: leadership if nobody leads and no candidate is queued, else empty. */
    public Optional<Lease> tryCampaign(String value) {
        Objects.requireNonNull(value, "value");
        try {
            return Optional.of(Lease.granted(
                Futures.uninterruptibly(() -> Bridge.campaignBlocking(election, value, 0.0, false)), name, openLeases));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /** {@link #campaign(String)} without blocking. Cancelling the future withdraws the candidacy. */
    public CompletableFuture<Lease> campaignAsync(String value) {
        return campaignAsyncFor(value, options.waitTimeout().orElse(null));
    }

    /** {@link #campaign(String, Duration)} without blocking. Cancelling the future withdraws the candidacy. */
    public CompletableFuture<Lease> campaignAsync(String value, Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        return campaignAsyncFor(value, timeout);
    }

    private CompletableFuture<Lease> campaignAsyncFor(String value, Duration timeout) {
        Objects.requireNonNull(value, "value");
        Double secs = timeout == null ? null : Futures.secs(timeout);
        return Futures.map(Bridge.campaign(election, value, secs), g -> Lease.granted(g, name, openLeases), Lease::discard);
    }

    /**
     * The current leader (value, term, remaining lease) as the server sees it now, or empty if
     * nobody leads. One round trip, bounded by the client's response timeout.
     */
    public Optional<Leader> observe() {
        return Optional.ofNullable(Futures.uninterruptibly(() -> Bridge.observeBlocking(election)))
            .map(LeaderElection::leader);
    }

    /** {@link #observe()} without blocking. */
    public CompletableFuture<Optional<Leader>> observeAsync() {
        return Futures.map(Bridge.observe(election), l -> Optional.ofNullable(l).map(LeaderElection::leader), l -> {});
    }

    private static Leader leader(NativeLeader l) {
        return new Leader(l.getValue(), l.getTerm(), Duration.ofNanos(l.getRemainingNanos()));
    }

    @Override
    public String toString() {
        return "LeaderElection{name=" + name + "}";
    }
}
