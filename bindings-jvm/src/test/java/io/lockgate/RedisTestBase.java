package io.lockgate;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** A test class's own redis-server (free loopback port, killed by pid), a client and a raw connection. */
abstract class RedisTestBase {
    static RedisServer server;
    static LockgateClient client;
    static Resp raw;

    @BeforeAll
    static void startServer() {
        server = RedisServer.start();
        client = LockgateClient.connect(server.url());
        raw = server.raw();
    }

    @AfterAll
    static void stopServer() {
        raw.close();
        client.close();
        server.close();
    }
}
