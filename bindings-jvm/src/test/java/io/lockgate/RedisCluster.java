package io.lockgate;

import java.util.ArrayList;
import java.util.List;

/**
 * A local Redis Cluster of three masters (no replicas, slots split evenly) from the launcher's
 * {@code cluster} kind, plus the lookups the cluster tests need (which master owns a key, which
 * lock keys live where).
 */
final class RedisCluster implements AutoCloseable {
    private final TestServers servers;
    /** The masters, in the launcher's node order. */
    final List<RedisServer> nodes;

    private RedisCluster(TestServers servers) {
        this.servers = servers;
        this.nodes = servers.nodes;
    }

    static RedisCluster start() {
        return new RedisCluster(TestServers.start("cluster"));
    }

    /** A seed URL (any node will do): node 0's {@code redis://}. */
    String url() {
        return nodes.get(0).url();
    }

    long keyslot(String key) {
        try (Resp r = nodes.get(0).raw()) {
            return r.num("CLUSTER", "KEYSLOT", key);
        }
    }

    /** The master that owns {@code key}'s slot (by the slot ranges the launcher assigned). */
    RedisServer owner(String key) {
        long slot = keyslot(key);
        for (RedisServer n : nodes) {
            List<?> range = (List<?>) n.info.get("slots");
            if (((Number) range.get(0)).longValue() <= slot && slot <= ((Number) range.get(1)).longValue()) {
                return n;
            }
        }
        throw new IllegalStateException("slot " + slot + " of " + key + " is unassigned");
    }

    /** {@code port:key} of every key of lock {@code name} on any node, except fence counters. */
    List<String> liveKeys(String name) {
        List<String> found = new ArrayList<>();
        for (RedisServer n : nodes) {
            try (Resp r = n.raw()) {
                for (String k : TestUtil.liveKeys(r, name)) {
                    found.add(n.port + ":" + k);
                }
            }
        }
        return found;
    }

    @Override
    public void close() {
        servers.close();
    }
}
