package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A {@code redlock://} {@link LockgateClient} against real, independent redis-server masters
 * started by the test (free loopback ports, temp dirs, killed by pid): majority grants with the
 * key on every master, minority loss tolerated, majority loss refused as a connection error,
 * the same Java types as every backend (Lock interface, CompletableFuture, AutoCloseable),
 * validation, and no fencing token.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RedlockTest {
    /** The deployment's max lease: short, so fresh masters grant after ~2-3 s (max_lease + 1 s). */
    static final Duration MAX_LEASE = Duration.ofSeconds(1);
    /** Waits out the delayed-restart rule on freshly started masters. */
    static final Duration STARTUP = Duration.ofSeconds(5);
    static final LockOptions RENEWED = LockOptions.renewedLease(MAX_LEASE);

    static List<RedisServer> masters;
    static LockgateClient redlock;

    static ClientOptions options() {
        return ClientOptions.builder()
            .set("maxLease", MAX_LEASE)
            .set("nodeTimeout", Duration.ofMillis(200))
            .set("retryDelay", Duration.ofMillis(10))
            .set("retryJitter", Duration.ofMillis(30))
            .connectTimeout(Duration.ofSeconds(1))
            .responseTimeout(Duration.ofSeconds(2))
            .build();
    }

    /** {@code n} masters of one launcher ({@code redlock --masters n}). */
    static List<RedisServer> start(int n) {
        return TestServers.start("redlock", "--masters", String.valueOf(n)).nodes;
    }

    /** The Redlock URL of {@code servers}: {@code redlock://127.0.0.1:p1,127.0.0.1:p2,...}. */
    static String url(List<RedisServer> servers) {
        List<String> hosts = new ArrayList<>();
        for (RedisServer s : servers) {
            hosts.add("127.0.0.1:" + s.port);
        }
        return "redlock://" + String.join(",", hosts);
    }

    /**
     * Waits until every master is past the delayed-restart window (up for max_lease + 1 s, in
     * whole seconds as INFO reports it), so that each one grants: an acquisition succeeds with a
     * majority and does not wait for the rest, so the first grant alone does not prove this.
     */
    static void awaitAllGranting(List<RedisServer> servers) {
        long needed = MAX_LEASE.plusSeconds(1).toSeconds();
        for (RedisServer s : servers) {
            try (Resp r = s.raw()) {
                assertTrue(TestUtil.eventually(10_000, () -> uptime(r) >= needed), "master " + s.port + " stays young");
            }
        }
    }

    static long uptime(Resp r) {
        for (String line : r.str("INFO", "server").split("\r?\n")) {
            if (line.startsWith("uptime_in_seconds:")) {
                return Long.parseLong(line.substring("uptime_in_seconds:".length()).trim());
            }
        }
        throw new AssertionError("INFO server has no uptime_in_seconds");
    }

    /** Stops the launcher of {@code servers} (from {@link #start}) with every master it started. */
    static void stopAll(List<RedisServer> servers) {
        servers.get(0).deployment.close();
    }

    @BeforeAll
    static void startMasters() throws Exception {
        masters = start(5);
        redlock = LockgateClient.connect(url(masters), options());
        // Fresh masters refuse grants for max_lease + 1 s: wait that out once for the class.
        redlock.getLock("warm-up", RENEWED).acquire(STARTUP).close();
        awaitAllGranting(masters);
    }

    @AfterAll
    static void stopMasters() {
        redlock.close();
        stopAll(masters);
    }

    static String key(String name) {
        return "lockgate:{" + name + "}:redlock";
    }

    /** The owner token stored for lock {@code name} on each reachable master (null where absent). */
    static List<String> values(List<RedisServer> servers, String name) {
        List<String> values = new ArrayList<>();
        for (RedisServer s : servers) {
            try (Resp r = s.raw()) {
                values.add(r.str("GET", key(name)));
            }
        }
        return values;
    }

    static long holders(List<RedisServer> servers, String name) {
        return values(servers, name).stream().filter(v -> v != null).count();
    }

    /**
     * Asserts that {@code n} masters hold {@code name}, soon: an acquisition returns once a
     * majority granted, and the other masters' grants may land a moment later. (A release waits
     * for every master, so after a release the count is checked exactly.)
     */
    static void assertHeldOn(List<RedisServer> servers, String name, long n) {
        assertTrue(TestUtil.eventually(300, () -> holders(servers, name) == n),
            name + " is held on " + holders(servers, name) + " masters, expected " + n);
    }

    @Test
    void eachRoundIsLoggedWithItsVotes() throws Exception {
        ch.qos.logback.classic.Logger logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger("lockgate");
        ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> appender = new ch.qos.logback.core.read.ListAppender<>();
        ch.qos.logback.classic.Level before = logger.getLevel();
        appender.start();
        logger.addAppender(appender);
        logger.setAdditive(false);
        logger.setLevel(ch.qos.logback.classic.Level.DEBUG);
        List<java.util.Map<String, Object>> rounds = new ArrayList<>();
        try (LockgateClient rl = LockgateClient.connect(url(masters), options())) {
            rl.getLock("rounds", RENEWED).acquire(STARTUP).release();
        } finally {
            logger.detachAppender(appender);
            logger.setAdditive(true);
            logger.setLevel(before);
        }
        for (ch.qos.logback.classic.spi.ILoggingEvent e : appender.list) {
            java.util.Map<String, Object> kv = new java.util.TreeMap<>();
            if (e.getKeyValuePairs() != null) {
                e.getKeyValuePairs().forEach(p -> kv.put(p.key, p.value));
            }
            if ("redlock.round".equals(kv.get("lockgate.event"))) {
                rounds.add(kv);
            }
        }
        assertEquals(2, rounds.size(), rounds.toString());
        java.util.Map<String, Object> acquire = rounds.get(0);
        java.util.Map<String, Object> release = rounds.get(1);
        assertEquals(List.of("acquire", "granted", 5L), List.of(acquire.get("lockgate.call"), acquire.get("lockgate.outcome"), acquire.get("lockgate.masters")), acquire.toString());
        assertEquals(5L, (Long) acquire.get("lockgate.yes") + (Long) acquire.get("lockgate.unanswered"), acquire.toString());
        assertEquals(List.of("release", "confirmed", 5L), List.of(release.get("lockgate.call"), release.get("lockgate.outcome"), release.get("lockgate.yes")), release.toString());
    }

    @Test
    void acquireAndReleaseOnEveryMaster() throws Exception {
        Capabilities caps = redlock.capabilities();
        assertEquals("Redlock", caps.backend());
        assertEquals("redlock", caps.scheme());
        assertFalse(caps.has("fencing") || caps.has("fifo") || caps.has("semaphore"), caps.toString());
        DistributedLock lock = redlock.getLock("orders", RENEWED);
        Lease lease = lock.acquire(Duration.ofSeconds(5));
        assertTrue(lease.isHeld());
        Duration left = lease.remaining().orElseThrow();
        assertTrue(!left.isNegative() && left.compareTo(MAX_LEASE) <= 0, left.toString());
        assertHeldOn(masters, "orders", 5);
        List<String> vs = values(masters, "orders");
        assertEquals(1, new HashSet<>(vs).size(), "the same owner token on every master: " + vs);
        // PROTOCOL.md §8 (version 4): the owner token, then the number of masters this client counts.
        assertTrue(vs.get(0) != null && vs.get(0).matches("[0-9a-f]{32}:5"), vs.toString());
        assertFalse(redlock.getLock("orders", RENEWED).tryAcquire().isPresent(), "held: another handle finds it taken");
        assertThrows(LockAlreadyHeldException.class, lock::tryAcquire, "this handle holds it: it never waits for itself");
        assertTrue(lease.release());
        assertEquals(0, holders(masters, "orders"));
        assertFalse(lease.isHeld());
        assertFalse(lease.release(), "a second release reports not held");
        lease.close(); // no-op after release
    }

    @Test
    void minorityDownStillGrantsMajorityDownIsAConnectionError() throws Exception {
        List<RedisServer> servers = start(5);
        try (LockgateClient rl = LockgateClient.connect(url(servers), options())) {
            DistributedLock lock = rl.getLock("minority", LockOptions.fixedLease(MAX_LEASE));
            Lease lease = lock.acquire(STARTUP);
            awaitAllGranting(servers);
            assertTrue(lease.release());
            lease = lock.acquire(Duration.ofSeconds(5));
            assertHeldOn(servers, "minority", 5);
            assertTrue(lease.release());

            servers.get(1).stop();
            servers.get(4).stop();
            Lease again = lock.tryAcquire().orElseThrow(() -> new AssertionError("3 of 5 are a majority"));
            assertTrue(again.isHeld());
            assertHeldOn(List.of(servers.get(0), servers.get(2), servers.get(3)), "minority", 3);
            assertTrue(again.release());

            servers.get(2).stop();
            LockConnectionException e = assertThrows(LockConnectionException.class, lock::tryAcquire);
            assertTrue(e.isRetryable());
            assertEquals("CONNECTION", e.code());
            assertThrows(LockConnectionException.class, lock::tryLock);
            // A waiting acquire keeps retrying until its timeout; too few masters answered, so it
            // ends with CONNECTION saying why, not TIMEOUT (issue 23 item 7) - behind Lock too:
            // tryLock(time) returns false only when the lock was held by someone else.
            LockConnectionException t = assertThrows(LockConnectionException.class,
                () -> lock.acquire(Duration.ofMillis(300)));
            assertTrue(t.getMessage().contains("masters granted"), t.getMessage());
            assertThrows(LockConnectionException.class, () -> lock.tryLock(300, TimeUnit.MILLISECONDS));
            // Failed attempts are undone on the masters that granted (well before the 1 s lease ends).
            assertHeldOn(List.of(servers.get(0), servers.get(3)), "minority", 0);
        } finally {
            stopAll(servers);
        }
    }

    @Test
    void twoClientsExcludeEachOther() throws Exception {
        try (LockgateClient other = LockgateClient.connect(url(masters), options())) {
            DistributedLock a = redlock.getLock("shared", RENEWED);
            DistributedLock b = other.getLock("shared", RENEWED);
            Lease held = a.acquire(Duration.ofSeconds(5));
            assertEquals(Optional.empty(), b.tryAcquire());
            assertFalse(b.tryLock());
            CompletableFuture<Lease> waiting = b.acquireAsync(Duration.ofSeconds(10));
            Thread.sleep(1500); // longer than the lease: renewal keeps it held
            assertTrue(held.isHeld());
            assertFalse(waiting.isDone(), "no grant while the other client holds it");
            assertTrue(held.release());
            Lease got = waiting.get(10, TimeUnit.SECONDS);
            assertTrue(got.isHeld());
            assertEquals(Optional.empty(), a.tryAcquire(), "now the first client is excluded");
            assertTrue(got.releaseAsync().get(5, TimeUnit.SECONDS));
            assertEquals(0, holders(masters, "shared"));
        }
    }

    @Test
    void tryWithResourcesAndLockInterfaceRelease() throws Exception {
        DistributedLock lock = redlock.getLock("twr", RENEWED);
        try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
            assertTrue(lease.isHeld());
            assertHeldOn(masters, "twr", 5);
        }
        assertEquals(0, holders(masters, "twr"));

        lock.lock();
        assertTrue(lock.isHeldByCurrentThread());
        assertEquals(1, lock.getHoldCount());
        assertHeldOn(masters, "twr", 5);
        assertThrows(LockAlreadyHeldException.class, lock::lock, "never reentrant: fails fast");
        AtomicReference<Throwable> fromOther = new AtomicReference<>();
        Thread unlocker = new Thread(() -> {
            try {
                lock.unlock();
            } catch (Throwable t) {
                fromOther.set(t);
            }
        });
        unlocker.start();
        unlocker.join();
        assertTrue(fromOther.get() instanceof IllegalMonitorStateException, "the thread owns it: " + fromOther.get());
        assertHeldOn(masters, "twr", 5);
        redlock.getLock("twr", RENEWED).unlock(); // any lock object of the name, on the owning thread
        assertEquals(0, holders(masters, "twr"));
        assertEquals(0, lock.getHoldCount());
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertThrows(UnsupportedOperationException.class, lock::newCondition);

        Optional<Lease> t = lock.tryAcquireAsync().get(5, TimeUnit.SECONDS);
        assertTrue(t.isPresent());
        t.get().close();
        assertEquals(0, holders(masters, "twr"));
    }

    @Test
    void lossIsNotifiedWhenAMajorityStops() throws Exception {
        List<RedisServer> servers = start(3);
        try (LockgateClient rl = LockgateClient.connect(url(servers), options())) {
            Lease lease = rl.getLock("lossy", RENEWED).acquire(STARTUP);
            AtomicReference<LockException> reason = new AtomicReference<>();
            CompletableFuture<LockException> heard = new CompletableFuture<>();
            lease.onLost(e -> {
                reason.set(e);
                heard.complete(e);
            });
            CompletableFuture<Void> lost = lease.lost();
            Thread.sleep(1500); // longer than the lease: renewals keep it
            assertTrue(lease.isHeld());
            assertFalse(lost.isDone());

            servers.get(0).stop();
            servers.get(2).stop();
            LockException e = heard.get(10, TimeUnit.SECONDS);
            assertNotNull(e);
            lost.get(1, TimeUnit.SECONDS);
            assertFalse(lease.isHeld());
            assertEquals(Optional.empty(), lease.remaining());
            assertTrue(lease.lostReason().isPresent());
            assertThrows(LockNotHeldException.class, lease::close, "closing a lost lease is loud");
            assertEquals(e.code(), lease.lostReason().orElseThrow().code());
        } finally {
            stopAll(servers);
        }
    }

    @Test
    void releasedLeaseIsNeverReportedLost() throws Exception {
        Lease lease = redlock.getLock("quiet", RENEWED).acquire(Duration.ofSeconds(5));
        CompletableFuture<Void> lost = lease.lost();
        assertTrue(lease.release());
        Thread.sleep(1500);
        assertFalse(lost.isDone());
        assertEquals(Optional.empty(), lease.lostReason());
    }

    @Test
    void extendKeepsAFixedLease() throws Exception {
        Lease lease = redlock.getLock("fixed", LockOptions.fixedLease(Duration.ofMillis(300)))
            .acquire(Duration.ofSeconds(5));
        lease.extend(MAX_LEASE);
        // At least a majority's keys now live longer than the original 300 ms lease allowed (an
        // extend needs a quorum; a master whose answer comes after the decision may keep the old
        // expiry, e.g. when its script cache was empty and the decided round is not re-sent).
        List<Long> ttls = pttls(masters, "fixed");
        assertTrue(ttls.stream().filter(t -> t > 300 && t <= 1000).count() >= 3, "PTTLs after extend (a majority of 5): " + ttls);
        Thread.sleep(400); // past the original lease
        assertTrue(lease.isHeld());
        assertThrows(LockInvalidArgumentException.class, () -> lease.extend(MAX_LEASE.plusMillis(1)),
            "no extension beyond max_lease");
        assertTrue(TestUtil.eventually(3000, () -> !lease.isHeld()), "a fixed lease ends");
        // Locally it ends a drift allowance before the masters' keys expire; once they have:
        assertTrue(TestUtil.eventually(3000, () -> holders(masters, "fixed") == 0));
        assertThrows(LockNotHeldException.class, lease::close, "closing an expired lease is loud");
    }

    static List<Long> pttls(List<RedisServer> servers, String name) {
        List<Long> ttls = new ArrayList<>();
        for (RedisServer s : servers) {
            try (Resp r = s.raw()) {
                ttls.add(r.num("PTTL", key(name)));
            }
        }
        return ttls;
    }

    @Test
    void closingTheClientReleasesItsLeases() throws Exception {
        LockgateClient rl = LockgateClient.connect(url(masters), options());
        DistributedLock lock = rl.getLock("closing", RENEWED);
        Lease lease = lock.acquire(Duration.ofSeconds(5));
        CompletableFuture<Void> lost = lease.lost();
        rl.close();
        assertEquals(0, holders(masters, "closing"));
        assertFalse(lease.isHeld());
        assertFalse(lost.isDone(), "closing is not a loss");
        assertThrows(LockClosedException.class, lock::tryAcquire);
        rl.close(); // idempotent
    }

    @Test
    void badInputIsAnInvalidArgument() throws Exception {
        String m = "127.0.0.1:" + masters.get(0).port;
        assertThrows(LockInvalidArgumentException.class, () -> LockgateClient.connect("redlock://", options()));
        LockInvalidArgumentException dup = assertThrows(LockInvalidArgumentException.class,
            () -> LockgateClient.connect("redlock://:s3cret@127.0.0.1:1,127.0.0.1:1", options()));
        assertFalse(dup.getMessage().contains("s3cret"), dup.getMessage());
        assertThrows(LockInvalidArgumentException.class, () -> LockgateClient.connect("redlock://" + m + "," + m, options()));
        assertThrows(LockInvalidArgumentException.class, () -> LockgateClient.connect("redlock://" + m + ",http://x", options()));
        String one = "redlock://" + m;
        assertThrows(LockInvalidArgumentException.class,
            () -> LockgateClient.connect(one, ClientOptions.builder().set("driftFactor", 0.7).build()));
        assertThrows(LockInvalidArgumentException.class,
            () -> LockgateClient.connect(one, ClientOptions.builder().set("maxLease", Duration.ofMillis(1)).build()));
        assertThrows(LockInvalidArgumentException.class,
            () -> LockgateClient.connect(one, ClientOptions.builder().set("nodeTimeout", Duration.ZERO).build()));
        assertThrows(LockInvalidArgumentException.class,
            () -> LockgateClient.connect(masters.get(0).url(), ClientOptions.builder().set("maxLease", MAX_LEASE).build()),
            "a Redlock setting on a redis:// URL");

        LockInvalidArgumentException tooLong = assertThrows(LockInvalidArgumentException.class,
            () -> redlock.getLock("x", LockOptions.renewedLease(MAX_LEASE.plusMillis(1))));
        assertTrue(tooLong.getMessage().contains("max_lease"), tooLong.getMessage());
        assertFalse(tooLong.isRetryable());
        // No lease given: the core's rule for every binding takes max_lease when it is below the
        // 30 s default (issue 14: this used to fail here and work in Python).
        assertNotNull(redlock.getLock("x"));
        assertThrows(LockInvalidArgumentException.class, () -> redlock.getLock("", RENEWED));
        // Reentrancy follows the capability the core reports for a Redlock: honoured, or UNSUPPORTED.
        LockOptions reentrant = RENEWED.toBuilder().reentrant(true).build();
        if (redlock.capabilities().has("reentrant")) {
            DistributedLock re = redlock.getLock("re", reentrant);
            try (Lease outer = re.acquire(Duration.ofSeconds(5)); Lease inner = re.acquire(Duration.ofSeconds(5))) {
                assertTrue(outer.isHeld() && inner.isHeld() && inner.fencingToken().isEmpty());
            }
            assertEquals(0, holders(masters, "re"));
        } else {
            assertThrows(LockUnsupportedException.class, () -> redlock.getLock("re", reentrant));
        }
        assertThrows(LockInvalidArgumentException.class,
            () -> redlock.getLock("x", RENEWED).acquire(Duration.ofSeconds(-1)));
    }

    // The README's Redlock example, with this class's short maxLease (a 10 s one would delay the
    // fresh masters by 11 s).
    @Test
    void readmeExampleRuns() throws Exception {
        List<String> work = new ArrayList<>();
        try (LockgateClient rl = LockgateClient.connect(url(masters), options())) {
            DistributedLock lock = rl.getLock("orders:42", LockOptions.renewedLease(MAX_LEASE));
            try (Lease lease = lock.acquire(Duration.ofSeconds(5))) {
                lease.onLost(reason -> work.add("lost"));
                assertTrue(lease.remaining().orElseThrow().compareTo(Duration.ZERO) > 0);
                work.add("leased");
            }
            lock.tryAcquire().ifPresent(Lease::close);
            lock.lock();
            try {
                work.add("locked");
            } finally {
                lock.unlock();
            }
        }
        assertEquals(List.of("leased", "locked"), work);
        assertEquals(0, holders(masters, "orders:42"));
    }

    // PROTOCOL.md §8: a Redlock grant has no fencing token, and says so through the one Lease type.
    @Test
    void redlockGrantsHaveNoFencingToken() throws Exception {
        try (Lease lease = redlock.getLock("no-token", RENEWED).acquire(Duration.ofSeconds(5))) {
            assertTrue(lease.fencingToken().isEmpty());
            assertFalse(lease.toString().contains("fencingToken"), lease.toString());
        }
        assertTrue(redlock.toString().startsWith("LockgateClient{url=redlock://127.0.0.1:"), redlock.toString());
        // What the backend cannot do fails fast and typed, before any network call.
        LockUnsupportedException e = assertThrows(LockUnsupportedException.class, () -> redlock.getSemaphore("s", 2));
        assertEquals("UNSUPPORTED", e.code());
        assertFalse(e.isRetryable());
        assertThrows(LockUnsupportedException.class, () -> redlock.getReadWriteLock("rw"));
        assertThrows(LockUnsupportedException.class, () -> redlock.getElection("e"));
    }
}
