package io.lockgate;

import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * A real ZooKeeper server (Debian's, 3.8) from the project's one test-server launcher
 * ({@code test-servers zookeeper}, conformance/README.md), and Apache Curator clients of it: the
 * peer that lockgate's ZooKeeper backend interoperates with. Closing it stops the server (by pid,
 * through the launcher).
 */
final class ZooKeeperServer implements AutoCloseable {
    private final TestServers deployment;

    private ZooKeeperServer(TestServers deployment) {
        this.deployment = deployment;
    }

    /** One standalone server on a free loopback port. */
    static ZooKeeperServer start() {
        return new ZooKeeperServer(TestServers.start("zookeeper"));
    }

    /** {@code zookeeper://127.0.0.1:port} (lockgate's URL of it). */
    String url() {
        return deployment.url();
    }

    /** The same members as a ZooKeeper connect string ({@code host:port,...}) for Curator and kazoo. */
    String connectString() {
        return connectString(url());
    }

    /** The members of a {@code zookeeper://} URL without credentials or chroot. */
    static String connectString(String url) {
        String rest = url.substring(url.indexOf("://") + 3);
        int slash = rest.indexOf('/');
        if (slash >= 0) {
            rest = rest.substring(0, slash);
        }
        return rest.substring(rest.lastIndexOf('@') + 1);
    }

    /** A started Curator client of this server with Curator's defaults (60 s session), connected. */
    CuratorFramework curator() {
        CuratorFramework c = CuratorFrameworkFactory.builder()
            .connectString(connectString())
            .retryPolicy(new ExponentialBackoffRetry(100, 5))
            .build();
        c.start();
        try {
            if (!c.blockUntilConnected(15, TimeUnit.SECONDS)) {
                c.close();
                throw new IllegalStateException("Curator did not connect to " + connectString());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            c.close();
            throw new IllegalStateException(e);
        }
        return c;
    }

    @Override
    public void close() {
        deployment.close();
    }
}
