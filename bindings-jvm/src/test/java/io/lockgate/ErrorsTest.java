package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockgate.internal.Bridge;
import io.lockgate.internal.ffi.InternalException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/** Bad input, the exception hierarchy, credentials never shown, and panics that never crash. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ErrorsTest {
    static RedisServer server;
    static LockgateClient client;

    @BeforeAll
    static void start() {
        server = RedisServer.start();
        client = LockgateClient.connect(server.url());
    }

    @AfterAll
    static void stop() {
        client.close();
        server.close();
    }

    private static void invalid(Executable call, String what) {
        LockInvalidArgumentException e = assertThrows(LockInvalidArgumentException.class, call, what);
        assertEquals("INVALID_ARGUMENT", e.code(), what);
        assertFalse(e.isRetryable(), what);
    }

    @Test
    void badInputIsRejectedBeforeAnyNetworkCall() throws Exception {
        invalid(() -> client.getLock(""), "empty name");
        invalid(() -> client.getLock("n".repeat(513)), "name too long");
        invalid(() -> client.getLock("x", LockOptions.fixedLease(Duration.ZERO)), "zero lease");
        invalid(() -> client.getLock("x", LockOptions.fixedLease(Duration.ofMillis(5))), "lease below 10 ms");
        invalid(() -> client.getLock("x", LockOptions.fixedLease(Duration.ofMillis(-1))), "negative lease");
        invalid(() -> client.getLock("x", LockOptions.fixedLease(Duration.ofDays(365))), "lease over 30 days");
        invalid(() -> client.getLock("x", LockOptions.fixedLease(Duration.ofSeconds(Long.MAX_VALUE))), "huge lease");
        invalid(() -> client.getLock("x", LockOptions.builder().entryTtl(Duration.ofMillis(1)).build()), "entry ttl");
        invalid(() -> client.getLock("x", LockOptions.builder().waitTimeout(Duration.ofSeconds(-1)).build()),
            "negative wait");
        DistributedLock lock = client.getLock("x");
        invalid(() -> lock.acquire(Duration.ofDays(365)), "wait over 30 days");
        invalid(() -> lock.acquire(Duration.ofSeconds(-1)), "negative wait");
        invalid(() -> lock.tryLock(Long.MAX_VALUE, TimeUnit.DAYS), "tryLock beyond 30 days");
        try (Lease lease = lock.acquire(Duration.ofSeconds(1))) {
            invalid(() -> lease.extend(Duration.ZERO), "zero extend");
            assertTrue(lease.isHeld(), "a rejected extend leaves the lease alone");
        }
        for (String url : List.of("", "http://127.0.0.1", "redis://", "redis://127.0.0.1:1/notadb", "not a url")) {
            invalid(() -> LockgateClient.connect(url), "url " + url);
        }
        invalid(() -> LockgateClient.connect(server.url(), ClientOptions.builder().keyPrefix("a{b").build()), "prefix");
        invalid(() -> LockgateClient.connect(server.url(),
            ClientOptions.builder().connectTimeout(Duration.ZERO).build()), "zero connect timeout");
        invalid(() -> LockgateClient.connect(server.url(), ClientOptions.builder().tlsCaPem("pem").build()),
            "CA for plaintext URL");
        assertThrows(NullPointerException.class, () -> client.getLock(null));
        assertThrows(NullPointerException.class, () -> lock.acquire(null));
        try (Resp raw = server.raw()) {
            assertEquals(0L, raw.num("EXISTS", "lockgate:{}"));
        }
    }

    private static void message(Executable call, String expected) {
        LockInvalidArgumentException e = assertThrows(LockInvalidArgumentException.class, call, expected);
        assertEquals(expected, e.getMessage());
    }

    // Issue 13, item 13: every option's error names the option as Java spells it (the builder
    // method) and speaks in seconds, the unit a Duration prints in (PT0.005S); never a Rust name
    // (entry_ttl, max_lease) or a Rust Debug duration (5ms).
    @Test
    void optionErrorsNameTheOptionAsJavaSpellsIt() throws Exception {
        message(() -> client.getLock("x", LockOptions.fixedLease(Duration.ofMillis(5))),
            "lease must be at least 0.01 s, got 0.005 s");
        message(() -> client.getLock("x", LockOptions.renewedLease(Duration.ofDays(31))),
            "lease must be at most 2592000 s, got 2678400 s");
        message(() -> client.getLock("x", LockOptions.builder().entryTtl(Duration.ofMillis(1)).build()),
            "entryTtl must be at least 0.1 s, got 0.001 s");
        message(() -> client.getLock("x", LockOptions.builder().waitTimeout(Duration.ofSeconds(-1)).build()),
            "waitTimeout must not be negative, got -1 s");
        message(() -> client.getSemaphore("x", 2, LockOptions.fixedLease(Duration.ZERO)),
            "lease must be at least 0.01 s, got 0 s");
        message(() -> client.getLock("x").acquire(Duration.ofDays(31)), "timeout must be at most 2592000 s, got 2678400 s");
        try (Lease lease = client.getLock("opt-names").acquire(Duration.ofSeconds(1))) {
            message(() -> lease.extend(Duration.ofMillis(1)), "extend's duration must be at least 0.01 s, got 0.001 s");
        }
        message(() -> LockgateClient.connect(server.url(), ClientOptions.builder().connectTimeout(Duration.ZERO).build()),
            "connectTimeout must be positive, got 0 s");
        message(() -> LockgateClient.connect(server.url(),
            ClientOptions.builder().responseTimeout(Duration.ofDays(31)).build()),
            "responseTimeout must be at most 2592000 s, got 2678400 s");
        message(() -> LockgateClient.connect(server.url(),
            ClientOptions.builder().replicaAcks(1, Duration.ofNanos(500_000)).build()),
            "replicaAckTimeout must be at least 0.001 s, got 0.0005 s");
        message(() -> LockgateClient.connect(server.url(),
            ClientOptions.builder().replicaAcks(0, Duration.ofMillis(100)).build()),
            "replicaAcks must be a whole number of at least 1, got 0");
        message(() -> LockgateClient.connect(server.url(), ClientOptions.builder()
                .replicaAcks(1, Duration.ofSeconds(2)).responseTimeout(Duration.ofSeconds(1)).build()),
            "replicaAcks timeout (2 s) must be below responseTimeout (1 s)");
        // The one generic setter: an unknown name lists the valid ones; a Java type the core
        // cannot take is refused by name, before anything is sent.
        LockInvalidArgumentException unknown = assertThrows(LockInvalidArgumentException.class,
            () -> LockgateClient.connect(server.url(), ClientOptions.builder().set("bogus", 1).build()));
        assertTrue(unknown.getMessage().startsWith("unknown client option \"bogus\"")
            && unknown.getMessage().contains("maxLease"), unknown.getMessage());
        message(() -> LockgateClient.connect(server.url(), ClientOptions.builder().set("keyPrefix", new Object()).build()),
            "keyPrefix must be a Boolean, a number, a Duration, a String or bytes, got Object");
        message(() -> LockgateClient.connect(server.url(), ClientOptions.builder().set("keyPrefix", 7).build()),
            "keyPrefix must be a string, got an integer");
        String one = server.url().replace("redis://", "redlock://");
        message(() -> LockgateClient.connect(one, ClientOptions.builder().set("maxLease", Duration.ofMillis(5)).build()),
            "maxLease must be at least 0.01 s, got 0.005 s");
        message(() -> LockgateClient.connect(one, ClientOptions.builder().set("nodeTimeout", Duration.ZERO).build()),
            "nodeTimeout must be at least 0.001 s, got 0 s");
        message(() -> LockgateClient.connect(one, ClientOptions.builder().set("retryDelay", Duration.ofDays(31)).build()),
            "retryDelay must be at most 2592000 s, got 2678400 s");
        message(() -> LockgateClient.connect(one, ClientOptions.builder().set("retryJitter", Duration.ofSeconds(-2)).build()),
            "retryJitter must not be negative, got -2 s");
        message(() -> LockgateClient.connect(one, ClientOptions.builder().set("driftFixed", Duration.ofSeconds(11)).build()),
            "driftFixed must be at most 10 s, got 11 s");
        message(() -> LockgateClient.connect(one, ClientOptions.builder().set("driftFactor", 0.7).build()),
            "driftFactor must be at least 0 and below 0.5, got 0.7");
        message(() -> LockgateClient.connect(one, ClientOptions.builder().set("connectTimeout", Duration.ZERO).build()),
            "connectTimeout must be positive, got 0 s");
    }

    // A user name without a password is never a silent switch to the default user (issue 13,
    // item 10): the URL is rejected before any network call (port 1 has no server anyway).
    @Test
    void userWithoutPasswordIsInvalid() {
        invalid(() -> LockgateClient.connect("redis://user@127.0.0.1:1"), "user without password");
        invalid(() -> LockgateClient.connect("redlock://user@127.0.0.1:1,127.0.0.1:2"), "Redlock: user without password");
    }

    @Test
    void unreachableServerIsARetryableConnectionError() {
        int port = TestUtil.freePort();
        LockConnectionException e = assertThrows(LockConnectionException.class, () -> LockgateClient.connect(
            "redis://127.0.0.1:" + port, ClientOptions.builder().connectTimeout(Duration.ofSeconds(1)).build()));
        assertEquals("CONNECTION", e.code());
        assertTrue(e.isRetryable());
    }

    // Issue 13, item 8: connectTimeout bounds the whole connect, not each attempt, against a
    // server that accepts the TCP connection and never answers.
    @Test
    void connectTimeoutBoundsTheWholeConnect() throws Exception {
        try (java.net.ServerSocket silent =
                 new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            long t0 = System.nanoTime();
            LockException e = assertThrows(LockException.class, () -> LockgateClient.connect(
                "redis://127.0.0.1:" + silent.getLocalPort(),
                ClientOptions.builder().connectTimeout(Duration.ofSeconds(1)).build()));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 900 && ms < 2000, "gave up after about the 1 s connect timeout: " + ms + " ms");
            assertEquals("CONNECTION", e.code(), e.toString());
            assertTrue(e.isRetryable(), e.toString());
        }
    }

    @Test
    void wrongKeyTypeIsAProtocolError() {
        try (Resp raw = server.raw()) {
            raw.call("HSET", "lockgate:{wt}", "f", "v");
        }
        LockProtocolException e = assertThrows(LockProtocolException.class, () -> client.getLock("wt").tryLock());
        assertEquals("PROTOCOL", e.code());
    }

    @Test
    void closedClientFailsWithClosed() throws Exception {
        LockgateClient c = LockgateClient.connect(server.url());
        DistributedLock lock = c.getLock("closing");
        Lease lease = lock.acquire(Duration.ofSeconds(1));
        c.close();
        c.close(); // idempotent
        assertTrue(c.toString().contains("closed"));
        LockClosedException e = assertThrows(LockClosedException.class, () -> lock.acquire(Duration.ofSeconds(1)));
        assertEquals("CLOSED", e.code());
        assertFalse(lease.isHeld(), "close released the lease");
        try (Resp raw = server.raw()) {
            assertEquals(0L, raw.num("EXISTS", "lockgate:{closing}"));
        }
    }

    // ACL users: the right password works; a wrong one is AUTHENTICATION; no password is ever shown.
    @Test
    void credentialsAreCheckedAndNeverShown() throws Exception {
        try (RedisServer acl = RedisServer.startAcl()) {
            try (LockgateClient ok = LockgateClient.connect("redis://app:s3cret-pw@127.0.0.1:" + acl.port)) {
                assertFalse(ok.toString().contains("s3cret-pw"), ok.toString());
                assertFalse(ok.url().contains("s3cret-pw"));
                DistributedLock lock = ok.getLock("acl");
                assertFalse(lock.toString().contains("s3cret-pw"));
                try (Lease lease = lock.acquire(Duration.ofSeconds(1))) {
                    assertFalse(lease.toString().contains("s3cret-pw"));
                }
            }
            LockAuthenticationException e = assertThrows(LockAuthenticationException.class,
                () -> LockgateClient.connect("redis://app:wrong-pw@127.0.0.1:" + acl.port));
            assertEquals("AUTHENTICATION", e.code());
            assertFalse(e.isRetryable());
            assertFalse(e.toString().contains("wrong-pw"), e.toString());
            assertThrows(LockAuthenticationException.class, () -> LockgateClient.connect(acl.url()));
        }
    }

    @Test
    void hierarchyMirrorsTheCoreCodes() {
        List<Class<? extends LockException>> kinds = List.of(LockInvalidArgumentException.class,
            LockTimeoutException.class, LockNotHeldException.class, LockConnectionException.class,
            LockAuthenticationException.class, LockProtocolException.class, LockCancelledException.class,
            LockClosedException.class, LockAlreadyHeldException.class, LockInternalException.class);
        for (Class<? extends LockException> k : kinds) {
            assertTrue(RuntimeException.class.isAssignableFrom(k), k.getName());
        }
        String[] codes = {"INVALID_ARGUMENT", "TIMEOUT", "NOT_HELD", "CONNECTION", "AUTHENTICATION", "PROTOCOL",
            "CANCELLED", "CLOSED", "ALREADY_HELD"};
        for (String code : codes) {
            LockException e = Errors.fromFailure(new io.lockgate.internal.ffi.Failure(code, "m", false));
            assertEquals(code, e.code());
            assertTrue(e.getClass() != LockException.class, code + " has its own class");
        }
        LockException held = Errors.fromFailure(new io.lockgate.internal.ffi.Failure("ALREADY_HELD", "m", false));
        assertTrue(held instanceof LockAlreadyHeldException, held.toString());
        LockException unknown = Errors.fromFailure(new io.lockgate.internal.ffi.Failure("NEW_KIND", "m", true));
        assertEquals(LockException.class, unknown.getClass());
        assertEquals("NEW_KIND", unknown.code());
        assertTrue(unknown.isRetryable());
    }

    // A Rust panic, sync or inside the runtime, becomes an exception; the JVM and library go on.
    @Test
    void nativePanicsNeverCrashTheJvm() throws Exception {
        InternalException sync = assertThrows(InternalException.class, () -> Bridge.debugPanic("boom (expected by the test)"));
        assertTrue(Errors.map(sync) instanceof LockInternalException);
        LockInternalException blocking = assertThrows(LockInternalException.class,
            () -> Futures.block(Bridge.debugPanicAsync("blocking boom (expected by the test)")));
        assertEquals("INTERNAL", blocking.code());
        java.util.concurrent.ExecutionException async = assertThrows(java.util.concurrent.ExecutionException.class,
            () -> Futures.async(Bridge.debugPanicAsync("async boom (expected by the test)"), v -> v).get());
        assertTrue(Errors.map(async) instanceof LockInternalException);
        try (Lease lease = client.getLock("after-panic").acquire(Duration.ofSeconds(1))) {
            assertTrue(lease.isHeld(), "the library still works after panics");
        }
    }
}
