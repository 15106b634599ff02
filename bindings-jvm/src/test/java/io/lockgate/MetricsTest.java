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
import ch.qos.logback.core.read.ListAppender;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;

/**
 * Metrics through Micrometer ({@link LockgateMetrics} bound to a {@link SimpleMeterRegistry}, as
 * a Spring application's registry would take it): a contended lock with a waiter that gets it,
 * a waiter that times out and a loss forced by deleting the lock, on a password-protected
 * server whose password must appear in no meter. The instruments, tags and values are the
 * core's, the same in every binding.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MetricsTest {
    private static final String PASSWORD = "s3cret-pw";

    @Test
    void aContendedLockIsMeasured() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        // Micrometer's own complaints (a meter registered again, ...), which an application would see.
        Logger micrometer = (Logger) LoggerFactory.getLogger("io.micrometer");
        ListAppender<ILoggingEvent> complaints = new ListAppender<>();
        complaints.start();
        Level micrometerLevel = micrometer.getLevel();
        micrometer.setLevel(Level.DEBUG);
        micrometer.addAppender(complaints);
        new LockgateMetrics().bindTo(registry);
        String[] base = {"lockgate.backend", "redis", "lockgate.primitive", "mutex"};
        try (RedisServer acl = RedisServer.startAcl(); Resp raw = acl.raw()) {
            String url = "redis://app:" + PASSWORD + "@127.0.0.1:" + acl.port;
            raw.call("AUTH", "app", PASSWORD);
            ClientOptions named = ClientOptions.builder().set("telemetryLockNames", true).build();
            try (LockgateClient a = LockgateClient.connect(url);
                 LockgateClient b = LockgateClient.connect(url, named);
                 LockgateClient c = LockgateClient.connect(url)) {
                Lease first = a.getLock("met").acquire(Duration.ofSeconds(5));
                CompletableFuture<Lease> waiting = b.getLock("met").acquireAsync(Duration.ofSeconds(10));
                assertThrows(LockTimeoutException.class, () -> c.getLock("met").acquire(Duration.ofMillis(300)));
                assertTrue(first.release());
                Lease second = waiting.get(10, TimeUnit.SECONDS);
                assertEquals(1L, raw.num("DEL", key("met", "")));
                second.lost().get(5, TimeUnit.SECONDS);
                assertTrue(eventually(5_000, () -> registry.find("lockgate.lock.losses").tag("lockgate.loss.reason", "refused").counter() != null),
                    "the loss's count");
            }
        } finally {
            LockgateMetrics.unbind(registry);
            micrometer.detachAppender(complaints);
            micrometer.setLevel(micrometerLevel);
        }
        assertEquals(java.util.List.of(), complaints.list.stream().map(ILoggingEvent::getFormattedMessage).toList(),
            "every meter registered once, quietly");
        Counter granted = registry.get("lockgate.lock.acquisitions").tags(base).tag("lockgate.outcome", "granted").tag("lockgate.lock.name", "met").counter();
        assertEquals(1.0, granted.count());
        assertEquals(1.0, registry.get("lockgate.lock.acquisitions").tags(base).tag("lockgate.outcome", "timed_out").counter().count());
        assertEquals(2.0, registry.get("lockgate.lock.acquisitions").tag("lockgate.outcome", "granted").counters().stream().mapToDouble(Counter::count).sum());
        Timer timedOut = registry.get("lockgate.lock.wait.duration").tags(base).tag("lockgate.outcome", "timed_out").timer();
        assertEquals(1, timedOut.count());
        double waited = timedOut.totalTime(TimeUnit.MILLISECONDS);
        assertTrue(waited >= 300 && waited < 2000, String.valueOf(waited));
        Timer waitedNamed = registry.get("lockgate.lock.wait.duration").tag("lockgate.lock.name", "met").tag("lockgate.outcome", "granted").timer();
        assertTrue(waitedNamed.totalTime(TimeUnit.MILLISECONDS) >= 290, "b waited behind a past c's 300 ms timeout");
        assertEquals(1, registry.get("lockgate.lock.hold.duration").tag("lockgate.outcome", "lost").timer().count());
        assertEquals(1, registry.get("lockgate.lock.hold.duration").tag("lockgate.outcome", "released").timer().count());
        assertEquals(1.0, registry.get("lockgate.lock.losses").tag("lockgate.loss.reason", "refused").counter().count());
        for (Gauge g : registry.get("lockgate.lock.held").gauges()) {
            assertEquals(0.0, g.value(), g.getId().toString());
        }
        for (Gauge g : registry.get("lockgate.lock.waiting").gauges()) {
            assertEquals(0.0, g.value(), g.getId().toString());
        }
        for (Meter m : registry.getMeters()) {
            assertTrue(m.getId().getName().startsWith("lockgate."), m.getId().toString());
            assertFalse(m.getId().toString().contains(PASSWORD), m.getId().toString());
            assertNotNull(m.getId().getTag("lockgate.backend"));
        }
    }
}
