package io.lockgate;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.NativeClient;
import io.lockgate.internal.ffi.NativeLock;
import io.lockgate.internal.ffi.NativeLockOptions;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A connection to one lock backend, chosen by the URL's scheme, shared by every lock made from
 * it. Thread-safe; make one per deployment and process, and close it on shutdown.
 *
 * <pre>{@code
 * try (LockgateClient client = LockgateClient.connect("redis://127.0.0.1:6379")) {
 *     try (Lease lease = client.getLock("orders:42").acquire(Duration.ofSeconds(5))) {
 *         store.write(order, lease.fencingToken().getAsLong());
 *     }
 * }
 * }</pre>
 *
 * <p>URLs (the core's grammar, the same in every language): {@code redis://[user:password@]host[:port][/db]},
 * {@code redis+cluster://node:port} (a Redis Cluster seed), {@code redlock://h1:p1,h2:p2,h3:p3}
 * (Redlock over independent masters), with TLS {@code rediss://}, {@code rediss+cluster://},
 * {@code rediss+redlock://}. What the backend offers is in {@link #capabilities()}; asking for
 * more is a {@link LockUnsupportedException}. Passwords never appear in output or errors.
 *
 * <p>The client keeps the {@code Lock} interface's holds per thread and every lease it granted
 * until released. At JVM exit (normal, {@code System.exit}, SIGINT, SIGTERM) a shutdown hook
 * closes every open client within 1.5 s, releasing held locks and withdrawing waits at once.
 */
public final class LockgateClient implements AutoCloseable {
    /** Clients not closed yet, kept reachable with their leases until closed (by their owner or, at exit, by the core). */
    private static final Set<LockgateClient> OPEN = ConcurrentHashMap.newKeySet();
    private final NativeClient client;
    private final String url;
    private final Capabilities capabilities;
    private final ThreadHolds threadHolds = new ThreadHolds();
    private final OpenLeases openLeases = new OpenLeases();
    /** The one close of the client, once started (by its owner or at exit); every close shares it. */
    private final AtomicReference<CompletableFuture<Void>> closing = new AtomicReference<>();

    private LockgateClient(NativeClient client) {
        this.client = client;
        this.url = client.url();
        this.capabilities = Capabilities.of(client.capabilities());
        Futures.call(() -> {
            client.onTelemetry(Slf4jTelemetry.INSTANCE);
            return null;
        });
        OPEN.add(this);
    }

    /**
     * Connects with the default options.
     *
     * @param url the backend's URL ({@code redis://host:6379}, {@code zookeeper://...}, {@code postgres://...}; README "URLs")
     * @return the connected client; close it when done
     */
    public static LockgateClient connect(String url) {
        return connect(url, ClientOptions.defaults());
    }

    /**
     * Connects and authenticates (blocking, bounded by the connect timeout): a wrong password is
     * {@link LockAuthenticationException}, no server {@link LockConnectionException}, a bad URL
     * or option {@link LockInvalidArgumentException}. A Redlock retries down masters in the background.
     *
     * @param url the backend's URL ({@code redis://host:6379}, {@code zookeeper://...}, {@code postgres://...}; README "URLs")
     * @param options the client's options (timeouts, key prefix, label, ...)
     * @return the connected client; close it when done
     */
    public static LockgateClient connect(String url, ClientOptions options) {
        Objects.requireNonNull(url, "url");
        Objects.requireNonNull(options, "options");
        return new LockgateClient(Futures.block(Bridge.connect(url, options.toNative())));
    }

    /**
     * {@link #connect(String)} without blocking.
     *
     * @param url the backend's URL
     * @return completes with the connected client, or with the exception {@link #connect(String)} throws
     */
    public static CompletableFuture<LockgateClient> connectAsync(String url) {
        return connectAsync(url, ClientOptions.defaults());
    }

    /**
     * {@link #connect(String, ClientOptions)} without blocking.
     *
     * @param url the backend's URL
     * @param options the client's options
     * @return completes with the connected client, or with the exception {@link #connect(String, ClientOptions)} throws
     */
    public static CompletableFuture<LockgateClient> connectAsync(String url, ClientOptions options) {
        Objects.requireNonNull(url, "url");
        Objects.requireNonNull(options, "options");
        return Futures.async(Bridge.connect(url, options.toNative()), LockgateClient::new);
    }

    /**
     * What this client's backend can do.
     *
     * @return the backend's capabilities (asking for anything else throws {@link LockUnsupportedException})
     */
    public Capabilities capabilities() {
        return capabilities;
    }

    /**
     * {@link #inspect(String, String)} of the mutex named {@code name}.
     *
     * @param name the mutex's name
     * @return the lock as read from the server
     */
    public LockSnapshot inspect(String name) {
        return inspect(name, "mutex");
    }

    /**
     * Reads lock {@code name} as {@code kind} ({@code mutex}, {@code rw}, {@code semaphore},
     * {@code election}) on the server, changing nothing; an unknown name is empty, the name is
     * checked as for {@link #getLock(String)}. Racy by nature: for humans and dashboards; to
     * decide whether to write, use the fencing token.
     *
     * @param name the lock's name
     * @param kind what to read it as: {@code mutex}, {@code rw}, {@code semaphore} or {@code election}
     * @return the lock as read from the server (holders, waiters, remaining lease)
     */
    public LockSnapshot inspect(String name, String kind) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(kind, "kind");
        return LockSnapshot.of(Futures.block(Bridge.inspect(client, name, kind)));
    }

    /**
     * Breaks the mutex named {@code name} (Redisson's {@code forceUnlock()}): removes its current
     * holder's entry and wakes the next waiter as a release would. For a holder known to be dead:
     * the broken holder learns of its loss at its next renewal, and only fenced storage stops its
     * late writes (PROTOCOL.md §15).
     *
     * @return what was removed, or empty when nothing was (the lock was free)
     * @param name the mutex's name
     */
    public Optional<BrokenHolder> breakLock(String name) {
        return breakLock(name, "mutex", null);
    }

    /**
     * {@link #breakLock(String)} of only the holder whose grant has fencing token {@code token}
     * (as {@link #inspect(String)} shows it): a stale token breaks nothing. {@code UNSUPPORTED} on
     * Redlock and memcached, which issue no tokens.
     *
     * @param name the mutex's name
     * @param token the fencing token of the holder to break
     * @return what was removed, or empty when nothing was (the holder had gone already)
     */
    public Optional<BrokenHolder> breakLock(String name, long token) {
        return breakLock(name, "mutex", token);
    }

    /**
     * Breaks lock {@code name} read as {@code kind} ({@code mutex}, {@code rw}, {@code semaphore},
     * {@code election}): its longest holder, or only the one with fencing token {@code token}
     * when not null.
     *
     * @param name the lock's name
     * @param kind what to read it as: {@code mutex}, {@code rw}, {@code semaphore} or {@code election}
     * @param token the fencing token of the holder to break, or {@code null} for the longest holder
     * @return what was removed, or empty when nothing was
     */
    public Optional<BrokenHolder> breakLock(String name, String kind, Long token) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(kind, "kind");
        return Optional.ofNullable(Futures.block(Bridge.breakLock(client, name, kind, token))).map(BrokenHolder::of);
    }

    /**
     * Adopts the lease {@code identity} names ({@link Lease#identity()} of another process) with
     * the default options (a renewed lease): see {@link #adopt(String, LockOptions)}.
     *
     * @param identity another lease's {@link Lease#identity()}
     * @return this client's lease on the same hold
     */
    public Lease adopt(String identity) {
        return adopt(identity, LockOptions.defaults());
    }

    /**
     * Adopts the lease {@code identity} names ({@link Lease#identity()} of another process;
     * redis-py's {@code Lock(token=...)}): a lease of this client on the same hold, with the same
     * fencing token — no second grant — renewed as {@code options} say, that extends, releases and
     * reports its loss. {@link LockNotHeldException} if it is no longer current;
     * {@link LockInvalidArgumentException} for a malformed identity (nothing is sent);
     * {@link LockUnsupportedException} on ZooKeeper and etcd.
     *
     * @param identity another lease's {@link Lease#identity()}
     * @param options how the adopted lease is renewed (its lease and auto-renewal)
     * @return this client's lease on the same hold, with the same fencing token
     */
    public Lease adopt(String identity, LockOptions options) {
        Objects.requireNonNull(identity, "identity");
        Objects.requireNonNull(options, "options");
        Bridge.Grant g = Futures.block(Bridge.adopt(client, identity, options.toNative()));
        return Lease.granted(g, g == null ? "" : g.lease.name(), openLeases);
    }

    /**
     * {@link #listLocks(String, long, String)} of the first page (100 locks) under {@code prefix}.
     *
     * @param prefix only names starting with this ({@code ""}: every lock)
     * @return the first page
     */
    public LockPage listLocks(String prefix) {
        Objects.requireNonNull(prefix, "prefix");
        return LockPage.of(Futures.block(Bridge.listLocks(client, prefix, null, null)));
    }

    /**
     * One page of the locks whose names start with {@code prefix} (every lock if empty), each a
     * lock someone holds or waits on; pass the page's cursor back for the next page (empty: the
     * last; a page may be short, even empty, before it). {@code limit} is capped to 1,000; below 1
     * it is a {@link LockInvalidArgumentException}. Never blocks the server; racy, like
     * {@link #inspect(String, String)}. {@link LockUnsupportedException} where the backend
     * cannot list (memcached).
     *
     * @param cursor the previous page's cursor, or {@code null} for the first page
     * @param prefix only names starting with this ({@code ""}: every lock)
     * @param limit the most locks on the page (1 or more; capped to 1,000)
     * @return one page of locks and the next page's cursor
     */
    public LockPage listLocks(String prefix, long limit, String cursor) {
        Objects.requireNonNull(prefix, "prefix");
        return LockPage.of(Futures.block(Bridge.listLocks(client, prefix, limit, cursor)));
    }

    /**
     * The mutex named {@code name} with the default options (see {@link DistributedLock}).
     *
     * @param name the lock's name
     * @return a handle on the mutex (no network call)
     */
    public DistributedLock getLock(String name) {
        return getLock(name, LockOptions.defaults());
    }

    /**
     * The mutex named {@code name}; no network call. Bad names or options: {@link LockInvalidArgumentException}.
     *
     * @param name the lock's name
     * @param options the lease, renewal, wait and reentrancy of its acquisitions
     * @return a handle on the mutex
     */
    public DistributedLock getLock(String name, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        NativeLock handle = Futures.call(() -> client.lock(name, options.toNative()));
        NativeLockOptions perThread = options.toBuilder().reentrant(false).build().toNative();
        return new DistributedLock(handle, () -> Futures.call(() -> client.lock(name, perThread)),
            name, options, ThreadHolds.Kind.MUTEX, threadHolds, openLeases);
    }

    /**
     * The read-write lock named {@code name} with the default options (see {@link DistributedReadWriteLock}).
     *
     * @param name the lock's name
     * @return a handle on the read-write lock (no network call)
     */
    public DistributedReadWriteLock getReadWriteLock(String name) {
        return getReadWriteLock(name, LockOptions.defaults());
    }

    /**
     * The read-write lock named {@code name}, {@code options} for both halves; no network call.
     *
     * @param name the lock's name
     * @param options the options of both halves
     * @return a handle on the read-write lock
     */
    public DistributedReadWriteLock getReadWriteLock(String name, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        NativeLockOptions asGiven = options.toNative();
        NativeLockOptions perThread = options.toBuilder().reentrant(false).build().toNative();
        // Fresh handles for every object: a core handle's clones would share its holds.
        return new DistributedReadWriteLock((fresh, writersFirst) -> Futures.call(
            () -> client.readWriteLock(name, fresh ? perThread : asGiven, writersFirst)),
            name, options, true, threadHolds, openLeases);
    }

    /**
     * The semaphore named {@code name} with {@code permits} permits and the default options.
     *
     * @param name the semaphore's name
     * @param permits how many holders at once (1 to 1,000,000; the same for every client of the name)
     * @return a handle on the semaphore (no network call)
     */
    public DistributedSemaphore getSemaphore(String name, int permits) {
        return getSemaphore(name, permits, LockOptions.defaults());
    }

    /**
     * The counting semaphore named {@code name} with {@code permits} permits (1 to 1,000,000, the
     * same for every client of the name); {@code options} set each permit's lease. No network call.
     *
     * @param name the semaphore's name
     * @param permits how many holders at once (1 to 1,000,000; the same for every client of the name)
     * @param options each permit's lease, renewal and wait
     * @return a handle on the semaphore
     */
    public DistributedSemaphore getSemaphore(String name, int permits, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        NativeLockOptions o = options.toNative();
        // No Lock interface for permits: the fresh-handle maker exists because DistributedLock takes one.
        return new DistributedSemaphore(new DistributedLock(
            Futures.call(() -> client.semaphore(name, permits, o)),
            () -> Futures.call(() -> client.semaphore(name, permits, o)),
            name, options, ThreadHolds.Kind.SEMAPHORE, threadHolds, openLeases), permits);
    }

    /**
     * The leader election named {@code name} with the default options (a renewed leadership lease).
     *
     * @param name the election's name
     * @return a handle on the election (no network call)
     */
    public LeaderElection getElection(String name) {
        return getElection(name, LockOptions.defaults());
    }

    /**
     * The leader election named {@code name}; {@code options.lease()} bounds a crashed leader's reign.
     *
     * @param name the election's name
     * @param options the leadership's lease and renewal
     * @return a handle on the election
     */
    public LeaderElection getElection(String name, LockOptions options) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(options, "options");
        return new LeaderElection(
            Futures.call(() -> client.election(name, options.toNative())), name, options, openLeases);
    }

    /**
     * Releases every lease and withdraws every wait of this client, then disconnects (blocking);
     * later calls fail with {@link LockClosedException}. Idempotent; joins a close under way.
     */
    @Override
    public void close() {
        Futures.awaitUninterruptibly(beginClose());
    }

    /**
     * {@link #close()} without blocking. Cancelling the returned future does not stop the close.
     *
     * @return completes when the client is closed
     */
    public CompletableFuture<Void> closeAsync() {
        return beginClose().copy();
    }

    /** The one close of this client, started now or already: close and closeAsync share it. */
    CompletableFuture<Void> beginClose() {
        CompletableFuture<Void> mine = new CompletableFuture<>();
        if (!closing.compareAndSet(null, mine)) {
            return closing.get();
        }
        OPEN.remove(this);
        Futures.async(Bridge.shutdown(client), v -> v).whenComplete((v, err) -> {
            openLeases.clear(); // released by the shutdown (or expiring); nothing left to keep
            if (err != null) {
                mine.completeExceptionally(Errors.map(err));
            } else {
                mine.complete(null);
            }
        });
        return mine;
    }

    /**
     * The URL, password redacted.
     *
     * @return the URL with its password replaced by {@code ***}
     */
    public String url() {
        return url;
    }

    @Override
    public String toString() {
        return "LockgateClient{url=" + url + (closing.get() != null ? ", closed" : "") + "}";
    }
}
