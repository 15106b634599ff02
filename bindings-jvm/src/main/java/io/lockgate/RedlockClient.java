package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeLockOptions;
import io.lockgate.internal.ffi.NativeRedlock;
import io.lockgate.internal.ffi.NativeRedlockLock;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * Redlock over N independent Redis masters (no replication between them): a lock is held when
 * a majority ({@code N / 2 + 1}) granted it within a short per-master timeout, so it survives
 * the loss of a minority of masters. Thread-safe; make one per deployment and process and close
 * it on shutdown. The protocol is PROTOCOL.md §8.
 *
 * <pre>{@code
 * List<String> masters = List.of("redis://m1:6379", "redis://m2:6379", "redis://m3:6379");
 * try (RedlockClient redlock = RedlockClient.connect(masters, RedlockOptions.builder()
 *         .maxLease(Duration.ofSeconds(10)).build())) {
 *     RedlockLock lock = redlock.getLock("orders:42", LockOptions.renewedLease(Duration.ofSeconds(10)));
 *     try (RedlockLease lease = lock.acquire(Duration.ofSeconds(5))) {
 *         // finish the protected work within lease.remaining(); lease.onLost(...) if a majority is lost
 *     }
 * }
 * }</pre>
 *
 * <p><b>No fencing tokens.</b> A Redlock grant carries none ({@link RedlockLease} has no
 * {@code fencingToken()}): a majority of independent masters is not a linearizable counter, so
 * a token taken from it could go backwards. The lease's validity, which rests on bounded clock
 * drift and process pauses, is the only guarantee. Where the protected resource needs fencing,
 * use {@link LockgateClient#getLock(String)} (single instance, optionally with replica
 * acknowledgements) instead.
 *
 * <p>Compared with {@link LockgateClient}'s mutex, waiting is by retrying (after
 * {@code retryDelay} plus random jitter), not in a fair queue, and a freshly (re)started master
 * takes part in no grant for {@link RedlockOptions.Builder#maxLease(Duration) maxLease} + 1 s.
 */
public final class RedlockClient implements AutoCloseable, ExitCleanup.Closer {
    private final NativeRedlock redlock;
    private final List<String> urls;
    private final int masters;
    private final int quorum;
    private final ClientState state = new ClientState();
    /** Set by the first close (by its owner or at exit); every close shares it. */

    private RedlockClient(NativeRedlock redlock) {
        this.redlock = redlock;
        this.urls = List.copyOf(redlock.urls());
        this.masters = redlock.masterCount();
        this.quorum = redlock.quorum();
        ExitCleanup.register(this);
    }

    /** Connects to the masters at {@code urls} with the default options (a 30 s {@code maxLease}). */
    public static RedlockClient connect(List<String> urls) {
        return connect(urls, RedlockOptions.defaults());
    }

    /**
     * Connects to every master it can reach (blocking, bounded by the connect timeout); masters
     * that are down are retried in the background and count as failed votes meanwhile. Throws
     * {@link LockConnectionException} if none is reachable, {@link LockAuthenticationException}
     * if a master refuses the credentials, and {@link LockInvalidArgumentException} (before any
     * network call) for an empty list, a malformed or duplicate URL, or options out of range.
     */
    public static RedlockClient connect(List<String> urls, RedlockOptions options) {
        List<String> u = checkUrls(urls);
        Objects.requireNonNull(options, "options");
        NativeRedlock r = Futures.uninterruptibly(() -> Bridge.redlockConnectBlocking(u, options.toNative()));
        return new RedlockClient(r);
    }

    /** {@link #connect(List)} without blocking. */
    public static CompletableFuture<RedlockClient> connectAsync(List<String> urls) {
        return connectAsync(urls, RedlockOptions.defaults());
    }

    /** {@link #connect(List, RedlockOptions)} without blocking. */
    public static CompletableFuture<RedlockClient> connectAsync(List<String> urls, RedlockOptions options) {
        List<String> u = checkUrls(urls);
        Objects.requireNonNull(options, "options");
        return Futures.map(Bridge.redlockConnect(u, options.toNative()), RedlockClient::new, NativeRedlock::destroy);
    }

    private static List<String> checkUrls(List<String> urls) {
        Objects.requireNonNull(urls, "urls");
        for (String u : urls) {
            Objects.requireNonNull(u, "urls must not contain null");
        }
        return List.copyOf(urls);
    }

    /** The Redlock named {@code name} with the default options (a 30 s lease, renewed while held). */
    public RedlockLock getLock(String name) {
        return getLock(name, LockOptions.defaults());
    }

    /**
     * The Redlock named {@code name} with {@code options} ({@code lease} and {@code autoRenew}
     * as for a mutex; {@code waitTimeout} for {@link RedlockLock#lock()} and
     * {@link RedlockLock#acquire()}; {@code entryTtl} has no use here: there is no queue).
     * Cheap: no network call. A bad name, options out of range, a lease longer than the
     * deployment's {@code maxLease}, or {@code reentrant(true)} are a
     * {@link LockInvalidArgumentException}.
     */
    public RedlockLock getLock(String name, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        NativeLockOptions o = options.toNative();
        NativeRedlockLock handle = Futures.uninterruptibly(() -> redlock.lock(name, o));
        return new RedlockLock(handle, () -> Futures.uninterruptibly(() -> redlock.lock(name, o)), name, options, state);
    }

    /** How many masters this deployment has. */
    public int masters() {
        return masters;
    }

    /** How many masters must grant a lock ({@code masters() / 2 + 1}). */
    public int quorum() {
        return quorum;
    }

    /** The masters' URLs, passwords redacted. */
    public List<String> urls() {
        return urls;
    }

    /**
     * Releases every lease and cancels every wait made through this client, then disconnects.
     * Blocks until the releases reached the masters (at most a couple of seconds). Later calls
     * on this client, its locks or leases fail with {@link LockClosedException}. Idempotent; a
     * call while another close is under way (another thread, the exit hook) waits for that one.
     */
    @Override
    public void close() {
        Futures.awaitUninterruptibly(beginClose());
    }

    /** {@link #close()} without blocking. Cancelling the returned future does not stop the close. */
    public CompletableFuture<Void> closeAsync() {
        return beginClose().copy();
    }

    /** Starts the one close of this client, or returns the one already started. */
    @Override
    public CompletableFuture<Void> beginClose() {
        return state.beginClose(this, () -> Futures.map(Bridge.redlockShutdown(redlock), v -> null, v -> {}));
    }

    @Override
    public String toString() {
        return "RedlockClient{masters=" + urls + ", quorum=" + quorum + (state.isClosing() ? ", closed" : "") + "}";
    }
}
