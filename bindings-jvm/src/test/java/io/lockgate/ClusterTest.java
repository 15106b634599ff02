package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A {@code redis+cluster://} client against a real three-master Redis Cluster started
 * by the test class: each lock's scripts reach the master owning its slot, a release hands the
 * lock to a waiter across nodes, and shared primitives work unchanged.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ClusterTest {
    static RedisCluster cluster;

    @BeforeAll
    static void start() {
        cluster = RedisCluster.start();
    }

    @AfterAll
    static void stop() {
        cluster.close();
    }

    /** A node's {@code redis://} URL as the cluster form. */
    private static String seed(String nodeUrl) {
        return nodeUrl.replace("redis://", "redis+cluster://");
    }

    private static String lockKey(String name) {
        return TestUtil.key(name, "");
    }

    /** One lock name per master, in node order ({@code stem-0}, {@code stem-1}, ... until all are hit). */
    private static List<String> namesOnEveryMaster(String stem) {
        Map<Integer, String> byMaster = new LinkedHashMap<>();
        for (int i = 0; byMaster.size() < cluster.nodes.size(); i++) {
            String name = stem + "-" + i;
            byMaster.putIfAbsent(cluster.owner(lockKey(name)).port, name);
        }
        List<String> names = new ArrayList<>();
        for (RedisServer n : cluster.nodes) {
            names.add(byMaster.get(n.port));
        }
        return names;
    }

    @Test
    void mutexesOnEveryMaster() throws Exception {
        List<String> names = namesOnEveryMaster("orders");
        try (LockgateClient client = LockgateClient.connect(seed(cluster.url()))) {
            assertEquals("Redis Cluster", client.capabilities().backend());
            assertTrue(client.capabilities().has("fencing") && !client.capabilities().has("replicaAcks"));
            List<Lease> leases = new ArrayList<>();
            for (String name : names) {
                leases.add(client.getLock(name).acquire(Duration.ofSeconds(5))); // all held at once
            }
            Set<Integer> owners = new HashSet<>();
            for (int i = 0; i < names.size(); i++) {
                String name = names.get(i);
                RedisServer owner = cluster.owner(lockKey(name));
                owners.add(owner.port);
                assertTrue(leases.get(i).isHeld());
                // The lock key (and the waiters hash carrying the holder's label, PROTOCOL.md
                // §12) lives on the master that owns its slot, and nowhere else.
                List<String> live = new ArrayList<>(cluster.liveKeys(name));
                java.util.Collections.sort(live);
                assertEquals(List.of(owner.port + ":" + lockKey(name), owner.port + ":" + lockKey(name) + ":waiters"), live);
                assertTrue(client.getLock(name).tryAcquire().isEmpty(), "another handle sees it held");
            }
            assertEquals(3, owners.size(), "the names span the three masters");
            for (Lease lease : leases) {
                assertTrue(lease.release());
            }
            for (int i = 0; i < names.size(); i++) {
                assertEquals(List.of(), cluster.liveKeys(names.get(i)));
                try (Lease again = client.getLock(names.get(i)).acquire(Duration.ofSeconds(5))) {
                    assertTrue(again.fencingToken().getAsLong() > leases.get(i).fencingToken().getAsLong(), "tokens increase per lock");
                }
            }
        }
    }

    // The lock lives on a master other than either client's seed node: the grant is published
    // there and reaches the waiter through the cluster bus, at once (not by a heartbeat re-run).
    @Test
    void contendedHandoffAcrossNodes() throws Exception {
        String name = namesOnEveryMaster("handoff").get(1);
        RedisServer owner = cluster.owner(lockKey(name));
        assertNotEquals(cluster.nodes.get(0).port, owner.port);
        try (LockgateClient holderClient = LockgateClient.connect(seed(cluster.url()));
             LockgateClient waiterClient = LockgateClient.connect(seed(cluster.nodes.get(2).url()));
             Resp ownerRaw = owner.raw()) {
            Lease holder = holderClient.getLock(name).acquire(Duration.ofSeconds(5));
            CompletableFuture<Lease> waiter = waiterClient.getLock(name).acquireAsync(Duration.ofSeconds(15));
            assertTrue(TestUtil.zcardAtLeast(ownerRaw, TestUtil.key(name, ":queue"), 1, 5000), "the waiter queued");
            Thread.sleep(100);
            assertFalse(waiter.isDone(), "no grant while the lock is held");
            long t0 = System.nanoTime();
            assertTrue(holder.release());
            Lease got = waiter.get(15, TimeUnit.SECONDS);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms < 1000, "handoff took " + ms + " ms");
            assertTrue(got.isHeld());
            assertTrue(got.fencingToken().getAsLong() > holder.fencingToken().getAsLong());
            assertEquals(0L, ownerRaw.num("ZCARD", TestUtil.key(name, ":queue")));
            assertTrue(got.release());
            assertEquals(List.of(), cluster.liveKeys(name));
        }
    }

    @Test
    void semaphoreOnACluster() throws Exception {
        List<String> names = namesOnEveryMaster("pool");
        try (LockgateClient c1 = LockgateClient.connect(seed(cluster.url()));
             LockgateClient c2 = LockgateClient.connect(seed(cluster.url()));
             LockgateClient c3 = LockgateClient.connect(seed(cluster.url()))) {
            for (String name : names.subList(1, names.size())) { // masters other than the seed
                DistributedSemaphore s1 = c1.getSemaphore(name, 2);
                DistributedSemaphore s2 = c2.getSemaphore(name, 2);
                DistributedSemaphore s3 = c3.getSemaphore(name, 2);
                Lease a = s1.acquire(Duration.ofSeconds(5));
                Lease b = s2.acquire(Duration.ofSeconds(5));
                assertNotEquals(a.fencingToken().getAsLong(), b.fencingToken().getAsLong());
                assertEquals(Optional.empty(), s3.tryAcquire(), "both permits are taken");
                String holders = TestUtil.key(name, ":sem:holders");
                try (Resp r = cluster.owner(holders).raw()) {
                    assertEquals(2L, r.num("ZCARD", holders));
                }
                CompletableFuture<Lease> third = s3.acquireAsync(Duration.ofSeconds(10));
                Thread.sleep(200);
                assertFalse(third.isDone());
                assertTrue(a.release());
                Lease c = third.get(10, TimeUnit.SECONDS);
                assertTrue(c.isHeld() && c.fencingToken().getAsLong() > b.fencingToken().getAsLong());
                assertTrue(b.release());
                assertTrue(c.release());
                assertEquals(List.of(), cluster.liveKeys(name));
            }
        }
    }

    @Test
    void readWriteLockOnACluster() throws Exception {
        String name = namesOnEveryMaster("catalog").get(2);
        try (LockgateClient c1 = LockgateClient.connect(seed(cluster.url()));
             LockgateClient c2 = LockgateClient.connect(seed(cluster.url()))) {
            DistributedReadWriteLock rw1 = c1.getReadWriteLock(name);
            DistributedReadWriteLock rw2 = c2.getReadWriteLock(name);
            try (Lease r1 = rw1.readLock().acquire(Duration.ofSeconds(5));
                 Lease r2 = rw2.readLock().acquire(Duration.ofSeconds(5))) {
                assertTrue(r1.isHeld() && r2.isHeld(), "readers share the lock");
                assertTrue(rw2.writeLock().tryAcquire().isEmpty(), "readers exclude a writer");
            }
            try (Lease w = rw2.writeLock().acquire(Duration.ofSeconds(5))) {
                assertTrue(w.isHeld());
                assertTrue(rw1.readLock().tryAcquire().isEmpty(), "a writer excludes readers");
            }
        }
        assertEquals(List.of(), cluster.liveKeys(name));
    }

    // The contrast that shows the option is what routes: without it the client talks to the seed
    // node only, which redirects every lock whose slot another master owns.
    @Test
    void withoutTheOptionOtherMastersRedirect() {
        List<String> names = namesOnEveryMaster("plain");
        try (LockgateClient plain = LockgateClient.connect(cluster.url())) {
            for (String name : names.subList(1, names.size())) {
                LockProtocolException e = assertThrows(LockProtocolException.class,
                    () -> plain.getLock(name).tryAcquire());
                assertTrue(e.getMessage().contains("MOVED"), e.getMessage());
            }
        }
    }

    @Test
    void clusterCannotBeCombinedWithReplicaAcks() {
        ClientOptions acks = ClientOptions.builder().replicaAcks(1, Duration.ofMillis(100)).build();
        // Rejected before connecting: nothing listens on port 1.
        assertThrows(LockInvalidArgumentException.class, () -> LockgateClient.connect("redis+cluster://127.0.0.1:1", acks));
        assertTrue(acks.toString().contains("replicaAcks=1"), acks.toString());
    }
}
