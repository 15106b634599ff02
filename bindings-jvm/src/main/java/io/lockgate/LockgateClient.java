package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeClient;
import io.lockgate.internal.ffi.NativeException;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A connection to one Redis server, shared by every lock made from it. Thread-safe; make one per
 * server and process and close it on shutdown.
 *
 * <pre>{@code
 * try (LockgateClient client = LockgateClient.connect("redis://127.0.0.1:6379")) {
 *     DistributedLock lock = client.getLock("orders:42");
 *     try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
 *         store.write(order, lease.fencingToken());
 *     }
 * }
 * }</pre>
 *
 * <p>URLs: {@code redis://[user:password@]host[:port][/db]} or {@code rediss://...} (TLS,
 * verified). The password never appears in {@link #toString()} or in any error message.
 */
public final class LockgateClient implements AutoCloseable {
    private final NativeClient client;
    private final String url;
    private final AtomicBoolean closed = new AtomicBoolean();

    private LockgateClient(NativeClient client) {
        this.client = client;
        this.url = client.url();
    }

    /** Connects with the default options. */
    public static LockgateClient connect(String url) {
        return connect(url, ClientOptions.defaults());
    }

    /**
     * Connects and authenticates (blocking, bounded by the connect timeout). A wrong password is
     * a {@link LockAuthenticationException}, an unreachable server a
     * {@link LockConnectionException}, a malformed URL a {@link LockInvalidArgumentException}.
     */
    public static LockgateClient connect(String url, ClientOptions options) {
        Objects.requireNonNull(url, "url");
        Objects.requireNonNull(options, "options");
        NativeClient c = Futures.uninterruptibly(() -> Bridge.connectBlocking(url, options.toNative()));
        return new LockgateClient(c);
    }

    /** {@link #connect(String)} without blocking. */
    public static CompletableFuture<LockgateClient> connectAsync(String url) {
        return connectAsync(url, ClientOptions.defaults());
    }

    /** {@link #connect(String, ClientOptions)} without blocking. */
    public static CompletableFuture<LockgateClient> connectAsync(String url, ClientOptions options) {
        Objects.requireNonNull(url, "url");
        Objects.requireNonNull(options, "options");
        return Futures.map(Bridge.connect(url, options.toNative()), LockgateClient::new, NativeClient::destroy);
    }

    /** The mutex named {@code name} with the default options (see {@link DistributedLock}). */
    public DistributedLock getLock(String name) {
        return getLock(name, LockOptions.defaults());
    }

    /**
     * The mutex named {@code name} with {@code options} (reentrant with
     * {@link LockOptions.Builder#reentrant(Boolean)}). Cheap: no network call. A name that is
     * empty or longer than 512 bytes, or options out of range, are a
     * {@link LockInvalidArgumentException}.
     */
    public DistributedLock getLock(String name, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        try {
            return new DistributedLock(client.lock(name, options.toNative()), name, options);
        } catch (NativeException e) {
            throw Errors.map(e);
        }
    }

    /** The read-write lock named {@code name} with the default options (see {@link DistributedReadWriteLock}). */
    public DistributedReadWriteLock getReadWriteLock(String name) {
        return getReadWriteLock(name, LockOptions.defaults());
    }

    /**
     * The read-write lock named {@code name}; {@code options} apply to both halves (reentrant
     * with {@link LockOptions.Builder#reentrant(Boolean)}). Cheap: no network call. Bad names or
     * options are a {@link LockInvalidArgumentException}.
     */
    public DistributedReadWriteLock getReadWriteLock(String name, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        return new DistributedReadWriteLock(
            Futures.uninterruptibly(() -> client.readWriteLock(name, options.toNative())), name, options, true);
    }

    /** The semaphore named {@code name} with {@code permits} permits and the default options. */
    public DistributedSemaphore getSemaphore(String name, int permits) {
        return getSemaphore(name, permits, LockOptions.defaults());
    }

    /**
     * The counting semaphore named {@code name} with {@code permits} permits (1 to 1,000,000;
     * every client of the name must use the same count); {@code options} set the lease of each
     * permit. Cheap: no network call. A bad count, name or options (including
     * {@code reentrant(true)}) are a {@link LockInvalidArgumentException}.
     */
    public DistributedSemaphore getSemaphore(String name, int permits, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        return new DistributedSemaphore(new DistributedLock(
            Futures.uninterruptibly(() -> client.semaphore(name, permits, options.toNative())),
            name, options, "semaphore", false), permits);
    }

    /** The leader election named {@code name} with the default options (a 30 s renewed leadership lease). */
    public LeaderElection getElection(String name) {
        return getElection(name, LockOptions.defaults());
    }

    /**
     * The leader election named {@code name}; {@code options.lease()} bounds how long a crashed
     * leader keeps leadership. Cheap: no network call. A bad name or options (including
     * {@code reentrant(true)}) are a {@link LockInvalidArgumentException}.
     */
    public LeaderElection getElection(String name, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        return new LeaderElection(
            Futures.uninterruptibly(() -> client.election(name, options.toNative())), name, options);
    }

    /**
     * Releases every lease and cancels every wait made through this client, then disconnects.
     * Blocks until the releases reached the server (at most a couple of seconds). Later calls on
     * this client, its locks or leases fail with {@link LockClosedException}. Idempotent.
     */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            Futures.uninterruptibly(() -> {
                Bridge.shutdownBlocking(client);
                return null;
            });
        }
    }

    /** {@link #close()} without blocking. */
    public CompletableFuture<Void> closeAsync() {
        if (closed.compareAndSet(false, true)) {
            return Futures.map(Bridge.shutdown(client), v -> null, v -> {});
        }
        return CompletableFuture.completedFuture(null);
    }

    /** The server URL, password redacted. */
    public String url() {
        return url;
    }

    @Override
    public String toString() {
        return "LockgateClient{url=" + url + (closed.get() ? ", closed" : "") + "}";
    }
}
