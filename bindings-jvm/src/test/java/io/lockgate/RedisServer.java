package io.lockgate;

import java.util.Map;

/**
 * One real redis-server of a {@link TestServers} deployment: its port, a raw connection, and
 * stop / restart / pause / resume through the launcher's stdin commands (a test never signals a
 * pid itself).
 */
final class RedisServer implements AutoCloseable {
    /** The deployment this server belongs to. */
    final TestServers deployment;
    /** Its index among the deployment's nodes (the launcher's commands name servers by it). */
    final int index;
    /** Its loopback port. */
    final int port;
    /** The launcher's description of this node ({@code role}, {@code slots}, ...). */
    final Map<?, ?> info;

    RedisServer(TestServers deployment, int index, int port, Map<?, ?> info) {
        this.deployment = deployment;
        this.index = index;
        this.port = port;
        this.info = info;
    }

    /** A server of its own (the launcher's {@code single} kind); {@link #close} stops it. */
    static RedisServer start() {
        return TestServers.start("single").nodes.get(0);
    }

    /** A server where only user {@code app} with password {@code s3cret-pw} may log in (kind {@code acl}). */
    static RedisServer startAcl() {
        return TestServers.start("acl").nodes.get(0);
    }

    /** {@code redis://127.0.0.1:port}, without credentials. */
    String url() {
        return "redis://127.0.0.1:" + port;
    }

    Resp raw() {
        return new Resp(port);
    }

    /** Stops this server (the others of its deployment keep running). */
    void stop() {
        deployment.command("stop " + index);
    }

    /** Kills this server and starts it again on its port, without data. */
    void restart() {
        deployment.command("restart " + index);
    }

    /** Freezes this server (SIGSTOP, sent by the launcher): connections stay open, nothing answers. */
    void pause() {
        deployment.command("pause " + index);
    }

    /** Undoes {@link #pause} (SIGCONT). */
    void resume() {
        deployment.command("resume " + index);
    }

    /** Stops the whole deployment this server belongs to. */
    @Override
    public void close() {
        deployment.close();
    }
}
