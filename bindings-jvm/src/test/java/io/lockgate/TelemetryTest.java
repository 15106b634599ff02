package io.lockgate;

import static io.lockgate.TestUtil.eventually;
import static io.lockgate.TestUtil.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import ch.qos.logback.core.read.ListAppender;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;
import org.slf4j.event.KeyValuePair;

/**
 * Telemetry through SLF4J (logger {@code lockgate}), read with logback's ListAppender as a
 * Java team's test would: a contended lock with a waiter that gets it, a waiter that times out
 * and a loss forced by deleting the lock, on a password-protected server whose password must
 * appear in no record.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TelemetryTest {
    private static final String PASSWORD = "s3cret-pw";
    private final Logger logger = (Logger) LoggerFactory.getLogger("lockgate");
    private final ListAppender<ILoggingEvent> appender = new ListAppender<>();
    private Level before;

    @BeforeEach
    void listen() {
        before = logger.getLevel();
        logger.setAdditive(false); // this test's records go to its appender only, not to stderr
        appender.start();
        logger.addAppender(appender);
    }

    @AfterEach
    void stopListening() {
        logger.detachAppender(appender);
        logger.setAdditive(true);
        logger.setLevel(before);
    }

    private static Map<String, Object> kv(ILoggingEvent e) {
        Map<String, Object> out = new TreeMap<>();
        List<KeyValuePair> pairs = e.getKeyValuePairs();
        if (pairs != null) {
            for (KeyValuePair p : pairs) {
                out.put(p.key, p.value);
            }
        }
        return out;
    }

    /** Every record so far. The driver records at its idle moments, so records may arrive while
     *  a test reads: they are copied under the appender's monitor, which
     *  {@code AppenderBase.doAppend} holds while appending. */
    private List<ILoggingEvent> logged() {
        synchronized (appender) {
            return new ArrayList<>(appender.list);
        }
    }

    private List<ILoggingEvent> records(String event) {
        return logged().stream().filter(e -> event.equals(kv(e).get("lockgate.event"))).collect(Collectors.toList());
    }

    @Test
    void aContendedLockIsLoggedWithKeyValues() throws Exception {
        logger.setLevel(Level.DEBUG);
        try (RedisServer acl = RedisServer.startAcl(); Resp raw = acl.raw()) {
            String url = "redis://app:" + PASSWORD + "@127.0.0.1:" + acl.port;
            raw.call("AUTH", "app", PASSWORD);
            try (LockgateClient a = LockgateClient.connect(url);
                 LockgateClient b = LockgateClient.connect(url);
                 LockgateClient c = LockgateClient.connect(url)) {
                Lease first = a.getLock("tel").acquire(Duration.ofSeconds(5));
                CompletableFuture<Lease> waiting = b.getLock("tel").acquireAsync(Duration.ofSeconds(10));
                assertThrows(LockTimeoutException.class, () -> c.getLock("tel").acquire(Duration.ofMillis(300)));
                assertTrue(first.release());
                Lease second = waiting.get(10, TimeUnit.SECONDS);
                assertEquals(1L, raw.num("DEL", key("tel", "")));
                second.lost().get(5, TimeUnit.SECONDS);
                assertTrue(eventually(5_000, () -> !records("lease.lost").isEmpty()), "the loss's record");
            }
        }
        Map<String, Long> count = logged().stream()
            .collect(Collectors.groupingBy(e -> String.valueOf(kv(e).get("lockgate.event")), TreeMap::new, Collectors.counting()));
        assertEquals(Map.of("acquire.started", 3L, "acquire.granted", 2L, "acquire.timed_out", 1L, "lease.released", 1L, "lease.lost", 1L), count);
        for (ILoggingEvent e : logged()) {
            Map<String, Object> kv = kv(e);
            assertEquals("lease.lost".equals(kv.get("lockgate.event")) ? Level.WARN : Level.DEBUG, e.getLevel(), kv.toString());
            assertEquals("redis", kv.get("lockgate.backend"));
            assertEquals("mutex", kv.get("lockgate.primitive"));
            assertFalse(kv.containsKey("lockgate.lock"), "lock names are off by default");
            assertFalse((e.getFormattedMessage() + kv).contains(PASSWORD), kv.toString());
        }
        List<ILoggingEvent> granted = records("acquire.granted");
        assertEquals(List.of(false, true), granted.stream().map(e -> kv(e).get("lockgate.queued")).collect(Collectors.toList()));
        assertTrue((Double) kv(granted.get(1)).get("lockgate.wait_s") >= 0.29, "b waited behind a past c's 300 ms timeout");
        ILoggingEvent timedOut = records("acquire.timed_out").get(0);
        double waited = (Double) kv(timedOut).get("lockgate.wait_s");
        assertTrue(waited >= 0.3 && waited < 2.0, String.valueOf(waited));
        assertEquals("acquire timed out", timedOut.getFormattedMessage());
        ILoggingEvent lost = records("lease.lost").get(0);
        assertEquals("refused", kv(lost).get("lockgate.reason"));
        assertEquals("lock lost", lost.getFormattedMessage());
        assertNotNull(kv(records("lease.released").get(0)).get("lockgate.held_s"));
    }

    @Test
    void lockNamesOnlyWhenAskedForAndDebugOnlyWhenEnabled() throws Exception {
        logger.setLevel(Level.WARN);
        try (RedisServer server = RedisServer.start()) {
            ClientOptions withNames = ClientOptions.builder().set("telemetryLockNames", true).build();
            try (LockgateClient quiet = LockgateClient.connect(server.url(), withNames)) {
                quiet.getLock("quiet").acquire(Duration.ofSeconds(5)).release();
            }
            assertTrue(logged().isEmpty(), "WARN only: no DEBUG record is even made");
            logger.setLevel(Level.DEBUG);
            try (LockgateClient named = LockgateClient.connect(server.url(), withNames)) {
                named.getLock("orders:42").acquire(Duration.ofSeconds(5)).release();
            }
        }
        assertEquals(List.of("acquire.started orders:42", "acquire.granted orders:42", "lease.released orders:42"),
            logged().stream().map(e -> kv(e).get("lockgate.event") + " " + kv(e).get("lockgate.lock")).collect(Collectors.toList()));
    }

    /** The count of events the native relay dropped while its queue was full (counted and
     *  handed over by the core's side, tested there) is told at WARN, even with DEBUG off, before
     *  the batch it came with; a batch with none dropped tells nothing of the kind. */
    @Test
    void eventsDroppedForAFullQueueAreToldAtWarn() {
        logger.setLevel(Level.WARN);
        Slf4jTelemetry.INSTANCE.recordBatch(List.of(), 0);
        assertEquals(List.of(), logged());
        Slf4jTelemetry.INSTANCE.recordBatch(List.of(), 7);
        assertEquals(1, logged().size(), logged().toString());
        ILoggingEvent told = logged().get(0);
        assertEquals(Level.WARN, told.getLevel());
        assertEquals("telemetry events dropped: the JVM took none while the queue for it was full", told.getFormattedMessage());
        assertEquals(Map.of("lockgate.dropped", 7L), kv(told));
    }

    @Test
    void aLeaseHeldTooLongIsLoggedOnceWhileHeld() throws Exception {
        logger.setLevel(Level.WARN);
        try (RedisServer server = RedisServer.start()) {
            ClientOptions options = ClientOptions.builder().set("heldTooLong", Duration.ofMillis(200)).build();
            try (LockgateClient client = LockgateClient.connect(server.url(), options)) {
                Lease lease = client.getLock("stuck").acquire(Duration.ofSeconds(5));
                assertTrue(eventually(5_000, () -> !records("lease.held_too_long").isEmpty()), "the held-too-long record");
                Thread.sleep(300);
                assertTrue(lease.isHeld());
                assertTrue(lease.release());
            }
        }
        assertEquals(1, logged().size(), logged().toString());
        ILoggingEvent told = logged().get(0);
        assertEquals(Level.WARN, told.getLevel());
        assertEquals("lock held longer than held_too_long", told.getFormattedMessage());
        double held = (Double) kv(told).get("lockgate.held_s");
        assertTrue(held >= 0.2 && held < 2.0, String.valueOf(held));
    }

    @Test
    void aLoggingBackendThatBlocksNeverBlocksALock() throws Exception {
        // An appender that blocks (a full disk, a stuck socket) holds up the thread that logs,
        // never the client's driver: a renewed 0.5 s lease stays held for 2 s, and other locks
        // are taken and released meanwhile, each within a bound.
        logger.setLevel(Level.DEBUG);
        CountDownLatch unblock = new CountDownLatch(1);
        AppenderBase<ILoggingEvent> blocking = new AppenderBase<>() {
            @Override
            protected void append(ILoggingEvent e) {
                try {
                    unblock.await();
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        blocking.start();
        logger.addAppender(blocking);
        try (RedisServer server = RedisServer.start(); LockgateClient client = LockgateClient.connect(server.url())) {
            Lease lease = client.getLock("blocked-log", LockOptions.renewedLease(Duration.ofMillis(500))).acquire(Duration.ofSeconds(5));
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            int pairs = 0;
            while (System.nanoTime() < until) {
                Lease other = client.getLock("other").acquireAsync(Duration.ofSeconds(1)).get(2, TimeUnit.SECONDS);
                assertTrue(other.release());
                pairs++;
            }
            assertTrue(pairs >= 10, "only " + pairs + " acquire/release pairs in 2 s");
            assertTrue(lease.isHeld(), "the renewed lease ended while the appender blocked");
            unblock.countDown();
            assertTrue(lease.release());
        } finally {
            unblock.countDown();
            logger.detachAppender(blocking);
        }
    }
}

