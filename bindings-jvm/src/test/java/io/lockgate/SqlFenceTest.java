package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * lockgate's fencing token enforced in the application's OWN table (docs/fencing-sql.md), on a
 * real PostgreSQL 15 from the project's launcher, with the application's JDBC connection
 * (org.postgresql, test scope): a holder paused past its lease writes late with its old token
 * and the database refuses it (0 rows: "you lost the lock, stop"), while the next holder's writes
 * land. The fenced write is {@code UPDATE account SET ..., fence = ? WHERE id = ? AND fence <= ?};
 * the next holder claims the row (the same UPDATE setting only {@code fence}) before it reads it.
 */
class SqlFenceTest {
    /** A fixed (not renewed) lease: a paused process renews nothing either. */
    private static final Duration PAUSED_LEASE = Duration.ofSeconds(1);
    private static final Duration WAIT = Duration.ofSeconds(10);

    static TestServers postgres;
    static Connection app;

    @BeforeAll
    static void start() throws SQLException {
        postgres = TestServers.start("postgres");
        app = jdbc(postgres.url());
        try (Statement s = app.createStatement()) {
            s.execute("CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)");
            s.execute("INSERT INTO account (id, balance) VALUES (1, 100)");
        }
    }

    @AfterAll
    static void stop() throws SQLException {
        if (app != null) {
            app.close();
        }
        if (postgres != null) {
            postgres.close();
        }
    }

    /** A JDBC connection for lockgate's {@code postgres://user:password@host:port/db} URL. */
    static Connection jdbc(String url) throws SQLException {
        URI u = URI.create(url);
        String[] login = u.getRawUserInfo().split(":", 2);
        Properties p = new Properties();
        p.setProperty("user", URLDecoder.decode(login[0], StandardCharsets.UTF_8));
        p.setProperty("password", URLDecoder.decode(login[1], StandardCharsets.UTF_8));
        return DriverManager.getConnection("jdbc:postgresql://" + u.getHost() + ":" + u.getPort() + u.getPath(), p);
    }

    /** The fenced write: 1 row while this token is the row's newest, 0 once a later holder wrote or claimed it. */
    static int write(long id, long balance, long fence) throws SQLException {
        try (PreparedStatement s = app.prepareStatement("UPDATE account SET balance = ?, fence = ? WHERE id = ? AND fence <= ?")) {
            s.setLong(1, balance);
            s.setLong(2, fence);
            s.setLong(3, id);
            s.setLong(4, fence);
            return s.executeUpdate();
        }
    }

    /** A new holder's first statement, before it reads the row: cuts off every older holder. */
    static int claim(long id, long fence) throws SQLException {
        try (PreparedStatement s = app.prepareStatement("UPDATE account SET fence = ? WHERE id = ? AND fence <= ?")) {
            s.setLong(1, fence);
            s.setLong(2, id);
            s.setLong(3, fence);
            return s.executeUpdate();
        }
    }

    static List<Long> row(long id) throws SQLException {
        try (PreparedStatement s = app.prepareStatement("SELECT balance, fence FROM account WHERE id = ?")) {
            s.setLong(1, id);
            try (ResultSet r = s.executeQuery()) {
                assertTrue(r.next());
                return List.of(r.getLong(1), r.getLong(2));
            }
        }
    }

    @Test
    void aPausedHoldersLateWriteIsRefusedAndTheNextHoldersLands() throws Exception {
        String name = "fence-account-1-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        try (LockgateClient a = LockgateClient.connect(postgres.url());
             LockgateClient b = LockgateClient.connect(postgres.url())) {
            Lease first = a.getLock(name, LockOptions.fixedLease(PAUSED_LEASE)).acquire(WAIT);
            long old = first.fencingToken().getAsLong();
            assertEquals(1, write(1, 110, old), "the holder's write lands");
            assertEquals(1, write(1, 110, old), "and again with the same token and value (a retry)");
            assertEquals(1, write(1, 120, old), "and again with a new value");

            // A pauses past its lease; B, waiting meanwhile, is granted when A's lease is over.
            try (Lease second = b.getLock(name).acquire(WAIT)) {
                long fresh = second.fencingToken().getAsLong();
                assertTrue(fresh > old, fresh + " > " + old);
                assertFalse(first.isHeld());
                assertEquals(1, claim(1, fresh), "B claims the row before reading it");

                // A wakes up and finishes its work: refused, the row is B's.
                assertEquals(0, write(1, 999, old), "the late write of the old token changes nothing");
                assertEquals(List.of(120L, fresh), row(1));
                assertEquals(1, write(1, 200, fresh), "B's write lands");
                assertEquals(0, write(1, 999, old));
                assertEquals(List.of(200L, fresh), row(1));
            }
        }
    }
}
