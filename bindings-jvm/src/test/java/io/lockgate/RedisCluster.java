package io.lockgate;

import java.util.ArrayList;
import java.util.List;

/**
 * A local Redis Cluster of three masters (no replicas) owned by a test: each node a real
 * cluster-enabled redis-server on free loopback ports (client and bus) with its data in a temp
 * dir, slots split evenly with {@code CLUSTER ADDSLOTSRANGE}, joined with {@code CLUSTER MEET},
 * ready once every node reports {@code cluster_state:ok}; stopped by pid. As
 * {@code core/tests/support/mod.rs}'s {@code RedisCluster}.
 */
final class RedisCluster implements AutoCloseable {
    /** The slot ranges of the three masters, in node order. */
    static final int[][] RANGES = {{0, 5460}, {5461, 10922}, {10923, 16383}};

    final List<RedisServer> nodes = new ArrayList<>();

    private RedisCluster() {
        try {
            List<Integer> busPorts = new ArrayList<>();
            for (int i = 0; i < RANGES.length; i++) {
                int bus = RedisServer.freePort();
                busPorts.add(bus);
                nodes.add(RedisServer.startWith(
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf", // relative to the node's --dir
                    "--cluster-port", String.valueOf(bus)));
            }
            for (int i = 0; i < nodes.size(); i++) {
                try (Resp r = nodes.get(i).raw()) {
                    r.call("CLUSTER", "ADDSLOTSRANGE", String.valueOf(RANGES[i][0]), String.valueOf(RANGES[i][1]));
                }
            }
            try (Resp first = nodes.get(0).raw()) {
                for (int i = 1; i < nodes.size(); i++) {
                    first.call("CLUSTER", "MEET", "127.0.0.1", String.valueOf(nodes.get(i).port),
                        String.valueOf(busPorts.get(i)));
                }
            }
            for (RedisServer node : nodes) {
                try (Resp r = node.raw()) {
                    boolean ok = TestUtil.eventually(20_000, () -> {
                        String info = r.str("CLUSTER", "INFO");
                        return info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3");
                    });
                    if (!ok) {
                        throw new IllegalStateException("cluster never became ready on port " + node.port
                            + ": " + r.str("CLUSTER", "INFO"));
                    }
                }
            }
        } catch (RuntimeException | Error e) {
            close();
            throw e;
        }
    }

    static RedisCluster start() {
        return new RedisCluster();
    }

    /** A seed URL (any node will do). */
    String url() {
        return nodes.get(0).url();
    }

    long keyslot(String key) {
        try (Resp r = nodes.get(0).raw()) {
            return r.num("CLUSTER", "KEYSLOT", key);
        }
    }

    /** The master that owns {@code key}'s slot. */
    RedisServer owner(String key) {
        long slot = keyslot(key);
        for (int i = 0; i < RANGES.length; i++) {
            if (RANGES[i][0] <= slot && slot <= RANGES[i][1]) {
                return nodes.get(i);
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
        for (RedisServer n : nodes) {
            n.close();
        }
    }
}
