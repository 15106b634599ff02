package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntUnaryOperator;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.zookeeper.KeeperException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * lockgate and Apache Curator on one ZooKeeper path (issue 15's interoperability): a service
 * migrates one process at a time, so a lockgate mutex, read-write lock, semaphore and election
 * must exclude Curator's {@code InterProcessMutex}, {@code InterProcessReadWriteLock},
 * {@code InterProcessSemaphoreV2} and {@code LeaderLatch} on the same path and be served with
 * them in arrival order. A scenario's {@code kinds} say who each party is, in arrival order:
 * {@code L} lockgate, {@code C} Curator (two clients of each, used alternately, like two
 * processes); the all-Curator rows are the control that shows the scenario holds for Curator
 * itself. Arrival order is made certain by waiting, after each party starts, until its node is
 * on the server. One real ZooKeeper server for the class, from the project's launcher.
 */
class CuratorInteropTest {
    private static final AtomicInteger SEQ = new AtomicInteger();
    /** How long to watch that nobody else is granted (a wrongly granted party would within it). */
    private static final long QUIET_MS = 150;

    static ZooKeeperServer zk;
    /** Two lockgate clients (two ZooKeeper sessions), connected on first use. */
    private static final LockgateClient[] LOCKGATE = new LockgateClient[2];
    static CuratorFramework[] curator = new CuratorFramework[2];
    /** Reads the tree (children counts, the leader's node) for the assertions. */
    static CuratorFramework inspector;

    @BeforeAll
    static void start() {
        zk = ZooKeeperServer.start();
        for (int i = 0; i < 2; i++) {
            curator[i] = zk.curator();
        }
        inspector = zk.curator();
    }

    @AfterAll
    static void stop() {
        for (int i = 0; i < 2; i++) {
            if (LOCKGATE[i] != null) {
                LOCKGATE[i].close();
            }
            if (curator[i] != null) {
                curator[i].close();
            }
        }
        if (inspector != null) {
            inspector.close();
        }
        if (zk != null) {
            zk.close();
        }
    }

    /** lockgate client {@code i} (0 or 1). */
    private static synchronized LockgateClient lockgate(int i) {
        if (LOCKGATE[i] == null) {
            LOCKGATE[i] = LockgateClient.connect(zk.url());
        }
        return LOCKGATE[i];
    }

    /** A fresh absolute znode path per scenario (lockgate names a ZooKeeper lock by its path). */
    private static String path(String what) {
        return "/lockgate-interop/" + what + "-" + SEQ.incrementAndGet();
    }

    private static String label(String kinds, int i) {
        return kinds.charAt(i) + String.valueOf(i);
    }

    private static boolean isLockgate(String kinds, int i) {
        char k = kinds.charAt(i);
        if (k != 'L' && k != 'C') {
            throw new IllegalArgumentException("kind " + k);
        }
        return k == 'L';
    }

    static int children(String path) {
        try {
            return inspector.getChildren().forPath(path).size();
        } catch (KeeperException.NoNodeException e) {
            return 0;
        } catch (Exception e) {
            throw new AssertionError("children of " + path, e);
        }
    }

    static void awaitChildren(String path, int n) {
        if (!TestUtil.eventually(ZkParty.STEP.toMillis(), () -> children(path) == n)) {
            throw new AssertionError(path + " has " + children(path) + " children, expected " + n);
        }
    }

    private static <T> T get(Future<T> f) throws Exception {
        return f.get(ZkParty.STEP.toMillis(), TimeUnit.MILLISECONDS);
    }

    private static void closeAll(List<? extends ZkParty> parties) {
        parties.forEach(ZkParty::close);
    }

    private static void assertIncreasing(List<Long> tokens, List<String> who) {
        for (int i = 1; i < tokens.size(); i++) {
            assertTrue(tokens.get(i) > tokens.get(i - 1),
                "fencing tokens (creation zxids) must increase in grant order: " + who + " got " + tokens);
        }
    }

    /**
     * Parties {@code [0, holding)} take the grant one after another and keep it; the rest queue
     * in order ({@code nodes.applyAsInt(i)}: how many children {@code queuePath} has once party
     * {@code i} waits); then each release of the oldest holder must grant exactly the next
     * waiter. Returns the tokens in grant order.
     */
    private static List<Long> serveInArrivalOrder(List<ZkParty> parties, int holding, Occupancy occ,
                                                  String queuePath, IntUnaryOperator nodes) throws Exception {
        List<Long> tokens = new ArrayList<>();
        for (int i = 0; i < holding; i++) {
            tokens.add(get(parties.get(i).begin(occ)));
        }
        List<Future<Long>> waiting = new ArrayList<>();
        for (int i = holding; i < parties.size(); i++) {
            waiting.add(parties.get(i).begin(occ));
            awaitChildren(queuePath, nodes.applyAsInt(i));
        }
        Thread.sleep(QUIET_MS);
        assertEquals(holding, occ.grants().size(), "granted beyond the holders: " + occ.grants());
        for (int k = 0; k + holding < parties.size(); k++) {
            parties.get(k).end(occ);
            List<String> grants = occ.awaitGrants(holding + k + 1, ZkParty.STEP.toMillis());
            assertEquals(parties.get(holding + k).label, grants.get(holding + k),
                "after " + parties.get(k) + " released, the next in arrival order is served: " + grants);
            tokens.add(get(waiting.get(k)));
        }
        for (int k = Math.max(0, parties.size() - holding); k < parties.size(); k++) {
            parties.get(k).end(occ);
        }
        assertEquals(List.of(), occ.violations());
        List<String> order = new ArrayList<>();
        parties.forEach(p -> order.add(p.label));
        assertEquals(order, occ.grants());
        return tokens;
    }

    // ---------------------------------------------------------------------------------- mutex

    @ParameterizedTest(name = "mutex, arrival order {0}")
    @ValueSource(strings = {"LC", "CL", "LCLCCL", "CLCLLC", "CCCC"})
    void mutexQueueIsServedInArrivalOrder(String kinds) throws Exception {
        String path = path("mutex");
        List<ZkParty> parties = new ArrayList<>();
        for (int i = 0; i < kinds.length(); i++) {
            parties.add(isLockgate(kinds, i)
                ? ZkParty.LockgateLock.mutex(label(kinds, i), lockgate(i % 2), path)
                : new ZkParty.CuratorMutex(label(kinds, i), curator[i % 2], path));
        }
        try {
            List<Long> tokens = serveInArrivalOrder(parties, 1, new Occupancy(1), path, i -> i + 1);
            assertIncreasing(tokens, parties.stream().map(p -> p.label).toList());
            awaitChildren(path, 0);
        } finally {
            closeAll(parties);
        }
    }

    @Test
    void mutexHolderOfEitherKindExcludesTheOther() throws Exception {
        String path = path("mutex-try");
        Occupancy occ = new Occupancy(1);
        List<ZkParty> parties = List.of(
            ZkParty.LockgateLock.mutex("L0", lockgate(0), path),
            new ZkParty.CuratorMutex("C1", curator[0], path),
            ZkParty.LockgateLock.mutex("L2", lockgate(1), path),
            new ZkParty.CuratorMutex("C3", curator[1], path));
        try {
            get(parties.get(0).begin(occ));
            assertFalse(parties.get(1).attempt(Duration.ofMillis(300), occ), "Curator acquired beside a lockgate holder");
            assertFalse(parties.get(2).attempt(Duration.ZERO, occ), "lockgate tryAcquire beside a lockgate holder");
            awaitChildren(path, 1); // the attempts withdrew their nodes
            parties.get(0).end(occ);

            get(parties.get(1).begin(occ));
            // lockgate's inspect shows Curator's holder, its node data (Curator's default: the
            // holder's IP address) as the label (PROTOCOL.md §14).
            LockSnapshot seen = lockgate(0).inspect(path);
            assertEquals(1, seen.holders().size(), seen.toString());
            assertTrue(seen.holders().get(0).label().isPresent(), seen.toString());
            assertTrue(seen.holders().get(0).holds().isEmpty(), "not this client's: " + seen);
            // lockgate's listing under the path shows Curator's lock once, as a mutex held by one
            // with its node data as the label (PROTOCOL.md §16).
            LockPage page = lockgate(0).listLocks(path);
            assertEquals(1, page.entries().size(), page.toString());
            LockPage.Entry entry = page.entries().get(0);
            assertEquals(path, entry.name(), page.toString());
            assertEquals("mutex", entry.kind(), page.toString());
            assertEquals(1, entry.holders(), page.toString());
            assertEquals(seen.holders().get(0).label(), entry.label(), page.toString());
            assertFalse(parties.get(2).attempt(Duration.ZERO, occ), "lockgate tryAcquire beside a Curator holder");
            assertFalse(parties.get(2).attempt(Duration.ofMillis(300), occ), "lockgate acquired beside a Curator holder");
            assertFalse(parties.get(3).attempt(Duration.ofMillis(300), occ), "Curator acquired beside a Curator holder");
            awaitChildren(path, 1);
            parties.get(1).end(occ);
            assertEquals(List.of(), occ.violations());
            awaitChildren(path, 0);
        } finally {
            closeAll(parties);
        }
    }

    /**
     * Breaking a Curator holder (PROTOCOL.md §15): lockgate deletes Curator's lock node by its path,
     * says what it removed (the node data as the label, its czxid as the fencing token), and
     * lockgate's waiter behind it gets the lock with a larger token; Curator's own release then
     * finds its node gone and leaves lockgate's holder alone.
     */
    @Test
    void breakingACuratorHolderLetsTheLockgateWaiterIn() throws Exception {
        String path = path("mutex-broken");
        org.apache.curator.framework.recipes.locks.InterProcessMutex curatorMutex =
            new org.apache.curator.framework.recipes.locks.InterProcessMutex(curator[0], path);
        assertTrue(curatorMutex.acquire(5, TimeUnit.SECONDS));
        long theirs = lockgate(1).inspect(path).holders().get(0).fencingToken().getAsLong();
        java.util.concurrent.CompletableFuture<Lease> waiting = lockgate(0).getLock(path).acquireAsync(Duration.ofSeconds(10));
        awaitChildren(path, 2);
        assertEquals(Optional.empty(), lockgate(1).breakLock(path, theirs - 1), "a stale token breaks nothing");
        BrokenHolder broken = lockgate(1).breakLock(path, theirs).orElseThrow();
        assertTrue(broken.label().isPresent(), "Curator's node data: " + broken);
        Lease lease = waiting.get(10, TimeUnit.SECONDS);
        assertTrue(lease.fencingToken().getAsLong() > theirs);
        curatorMutex.release();
        assertTrue(lease.isHeld());
        assertTrue(lease.release());
        awaitChildren(path, 0);
    }

    /**
     * The migration table's connection calls: Curator's {@code namespace("…")} is the URL's chroot
     * and its {@code sessionTimeoutMs} lockgate's {@code sessionTimeout}; lockgate, connecting
     * first, meets the Curator client of the same namespace on the same path.
     */
    @Test
    void chrootIsCuratorsNamespace() throws Exception {
        String ns = "interop-ns-" + SEQ.incrementAndGet();
        String path = "/locks/orders";
        Occupancy occ = new Occupancy(1);
        try (LockgateClient chrooted = LockgateClient.connect(zk.url() + "/" + ns,
                 ClientOptions.builder().set("sessionTimeout", Duration.ofSeconds(10)).build())) {
            List<ZkParty> parties = List.of(
                ZkParty.LockgateLock.mutex("L0", chrooted, path),
                new ZkParty.CuratorMutex("C1", curator[0].usingNamespace(ns), path));
            try {
                get(parties.get(0).begin(occ));
                awaitChildren("/" + ns + path, 1);
                assertFalse(parties.get(1).attempt(Duration.ofMillis(300), occ), "Curator acquired beside a lockgate holder");
                parties.get(0).end(occ);
                assertTrue(parties.get(1).attempt(Duration.ofSeconds(5), occ));
                assertFalse(parties.get(0).attempt(Duration.ZERO, occ), "lockgate acquired beside a Curator holder");
                parties.get(1).end(occ);
                assertEquals(List.of(), occ.violations());
                awaitChildren("/" + ns + path, 0);
            } finally {
                closeAll(parties);
            }
        }
    }

    // ------------------------------------------------------------------------- read-write lock

    /**
     * Arrival order w r r w r r (a writer holds; two readers, a writer, two readers queue): the
     * two readers are served together, then the writer alone (readers behind a queued writer
     * wait: Curator's rule and lockgate's default writers-first), then the last two readers.
     */
    @ParameterizedTest(name = "read-write lock, arrival order {0} over w r r w r r")
    @ValueSource(strings = {"CLCLCL", "LCLCLC", "CCCCCC"})
    void readWriteQueueIsServedInArrivalOrder(String kinds) throws Exception {
        String path = path("rw");
        String modes = "wrrwrr";
        List<ZkParty> parties = new ArrayList<>();
        for (int i = 0; i < modes.length(); i++) {
            boolean write = modes.charAt(i) == 'w';
            String label = label(kinds, i) + (write ? "w" : "r");
            if (isLockgate(kinds, i)) {
                parties.add(write ? ZkParty.LockgateLock.write(label, lockgate(i % 2), path)
                    : ZkParty.LockgateLock.read(label, lockgate(i % 2), path));
            } else {
                parties.add(new ZkParty.CuratorReadWrite(label, curator[i % 2], path, write));
            }
        }
        Occupancy occ = new Occupancy(Integer.MAX_VALUE);
        try {
            long firstWriter = get(parties.get(0).begin(occ));
            List<Future<Long>> f = new ArrayList<>();
            f.add(null);
            for (int i = 1; i < parties.size(); i++) {
                f.add(parties.get(i).begin(occ));
                awaitChildren(path, i + 1);
            }
            Thread.sleep(QUIET_MS);
            assertEquals(List.of(parties.get(0).label), occ.grants(), "nobody beside the writer");

            parties.get(0).end(occ);
            List<String> g = occ.awaitGrants(3, ZkParty.STEP.toMillis());
            assertEquals(Set.of(parties.get(1).label, parties.get(2).label), new HashSet<>(g.subList(1, 3)),
                "the two readers that arrived before the second writer share the lock: " + g);
            Thread.sleep(QUIET_MS);
            assertEquals(3, occ.grants().size(), "the second writer waits for both readers, and readers behind it wait: "
                + occ.grants());
            parties.get(1).end(occ);
            Thread.sleep(QUIET_MS);
            assertEquals(3, occ.grants().size(), "one reader still holds: " + occ.grants());
            parties.get(2).end(occ);
            g = occ.awaitGrants(4, ZkParty.STEP.toMillis());
            assertEquals(parties.get(3).label, g.get(3));
            long secondWriter = get(f.get(3));
            assertTrue(secondWriter > firstWriter, "write tokens increase: " + firstWriter + " then " + secondWriter);
            Thread.sleep(QUIET_MS);
            assertEquals(4, occ.grants().size(), "readers queued behind the writer wait: " + occ.grants());

            parties.get(3).end(occ);
            g = occ.awaitGrants(6, ZkParty.STEP.toMillis());
            assertEquals(Set.of(parties.get(4).label, parties.get(5).label), new HashSet<>(g.subList(4, 6)));
            parties.get(4).end(occ);
            parties.get(5).end(occ);
            assertEquals(List.of(), occ.violations());
            awaitChildren(path, 0);
        } finally {
            closeAll(parties);
        }
    }

    @Test
    void readersShareAcrossKindsAndExcludeWritersOfTheOtherKind() throws Exception {
        String path = path("rw-try");
        Occupancy occ = new Occupancy(Integer.MAX_VALUE);
        List<ZkParty> parties = List.of(
            ZkParty.LockgateLock.read("L0r", lockgate(0), path),
            new ZkParty.CuratorReadWrite("C1r", curator[0], path, false),
            new ZkParty.CuratorReadWrite("C2w", curator[1], path, true),
            ZkParty.LockgateLock.write("L3w", lockgate(1), path),
            ZkParty.LockgateLock.read("L4r", lockgate(1), path));
        try {
            get(parties.get(0).begin(occ));
            assertTrue(parties.get(1).attempt(Duration.ofMillis(2000), occ), "a Curator reader shares a lockgate read hold");
            assertFalse(parties.get(2).attempt(Duration.ofMillis(300), occ), "a Curator writer beside readers");
            assertFalse(parties.get(3).attempt(Duration.ZERO, occ), "a lockgate writer beside readers");
            awaitChildren(path, 2);
            parties.get(0).end(occ);
            parties.get(1).end(occ);

            get(parties.get(2).begin(occ));
            assertFalse(parties.get(4).attempt(Duration.ofMillis(300), occ), "a lockgate reader beside a Curator writer");
            assertFalse(parties.get(3).attempt(Duration.ZERO, occ), "a lockgate writer beside a Curator writer");
            parties.get(2).end(occ);
            assertEquals(List.of(), occ.violations());
            awaitChildren(path, 0);
        } finally {
            closeAll(parties);
        }
    }

    // ------------------------------------------------------------------------------- semaphore

    /**
     * Two permits: parties 0 and 1 hold, 2, 3 and 4 queue; each release admits the next in
     * arrival order. Curator's InterProcessSemaphoreV2 queues on the mutex {@code path/locks}
     * and counts holders in {@code path/leases}; a waiter is in the queue once its node is
     * under {@code path/locks}.
     */
    @ParameterizedTest(name = "semaphore of 2, arrival order {0}")
    @ValueSource(strings = {"LCCLC", "CLLCL", "CCCCC"})
    void semaphoreQueueIsServedInArrivalOrder(String kinds) throws Exception {
        String path = path("sem");
        List<ZkParty> parties = new ArrayList<>();
        for (int i = 0; i < kinds.length(); i++) {
            parties.add(isLockgate(kinds, i)
                ? new ZkParty.LockgatePermit(label(kinds, i), lockgate(i % 2), path, 2)
                : new ZkParty.CuratorPermit(label(kinds, i), curator[i % 2], path, 2));
        }
        // A third permit is refused to both kinds (the control row: to Curator twice).
        List<ZkParty> probes = List.of(
            kinds.indexOf('L') >= 0 ? new ZkParty.LockgatePermit("Lx", lockgate(0), path, 2)
                : new ZkParty.CuratorPermit("Cy", curator[1], path, 2),
            new ZkParty.CuratorPermit("Cx", curator[0], path, 2));
        Occupancy occ = new Occupancy(2);
        try {
            get(parties.get(0).begin(occ));
            get(parties.get(1).begin(occ));
            assertFalse(probes.get(0).attempt(Duration.ZERO, occ), "a third permit of 2 (" + probes.get(0) + ")");
            assertFalse(probes.get(1).attempt(Duration.ofMillis(300), occ), "a third Curator permit of 2");
            awaitChildren(path + "/leases", 2);
            awaitChildren(path + "/locks", 0);
            parties.get(0).end(occ);
            parties.get(1).end(occ);
            occ = new Occupancy(2);
            serveInArrivalOrder(parties, 2, occ, path + "/locks", i -> i - 1);
            awaitChildren(path + "/leases", 0);
            awaitChildren(path + "/locks", 0);
        } finally {
            closeAll(parties);
            closeAll(probes);
        }
    }

    /** The migration table's claim: Curator's InterProcessSemaphoreMutex is a lockgate semaphore of 1. */
    @Test
    void semaphoreMutexIsASemaphoreOfOne() throws Exception {
        String path = path("sem-mutex");
        InterProcessSemaphoreMutex curatorLock = new InterProcessSemaphoreMutex(curator[0], path);
        DistributedSemaphore ours = lockgate(0).getSemaphore(path, 1);
        assertTrue(curatorLock.acquire(5, TimeUnit.SECONDS));
        assertTrue(ours.tryAcquire().isEmpty(), "lockgate's permit beside Curator's semaphore mutex");
        curatorLock.release();
        try (Lease lease = ours.acquire(Duration.ofSeconds(5))) {
            assertTrue(lease.isHeld());
            assertFalse(curatorLock.acquire(300, TimeUnit.MILLISECONDS), "Curator's semaphore mutex beside lockgate's permit");
        }
        awaitChildren(path + "/leases", 0);
    }

    /** The migration table's claim: Curator's LeaderSelector queues on a mutex, so it shares lockgate's mutex. */
    @Test
    void leaderSelectorSharesTheMutex() throws Exception {
        String path = path("selector");
        java.util.concurrent.CountDownLatch leading = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch resign = new java.util.concurrent.CountDownLatch(1);
        DistributedLock ours = lockgate(0).getLock(path);
        try (LeaderSelector selector = new LeaderSelector(curator[0], path, new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework client) throws Exception {
                leading.countDown();
                resign.await(); // leads until the test lets go
            }
        })) {
            selector.start();
            assertTrue(leading.await(10, TimeUnit.SECONDS));
            assertTrue(ours.tryAcquire().isEmpty(), "lockgate's mutex beside Curator's leader");
            java.util.concurrent.CompletableFuture<Lease> waiting = ours.acquireAsync(Duration.ofSeconds(10));
            awaitChildren(path, 2);
            Thread.sleep(QUIET_MS);
            assertFalse(waiting.isDone(), "lockgate granted while Curator leads");
            resign.countDown();
            try (Lease lease = waiting.get(10, TimeUnit.SECONDS)) {
                assertTrue(lease.isHeld());
                assertFalse(selector.hasLeadership());
            }
        }
        awaitChildren(path, 0);
    }

    // -------------------------------------------------------------------------------- election

    /**
     * Candidates campaign in arrival order; the first leads; each resignation elects the next.
     * At every step lockgate's {@code observe()} and Curator's {@code LeaderLatch.getLeader()}
     * name the same leader (lockgate's value is its node's data, Curator's participant id), and
     * the term lockgate reports is the leader node's creation zxid.
     */
    @ParameterizedTest(name = "election, arrival order {0}")
    @ValueSource(strings = {"CLCL", "LCLC", "CCCC"})
    void electionFollowsArrivalOrderAndBothSeeTheLeader(String kinds) throws Exception {
        String path = path("election");
        List<ZkParty> parties = new ArrayList<>();
        for (int i = 0; i < kinds.length(); i++) {
            parties.add(isLockgate(kinds, i)
                ? new ZkParty.LockgateCandidate(label(kinds, i), lockgate(i % 2), path)
                : new ZkParty.CuratorLatch(label(kinds, i), curator[i % 2], path));
        }
        // The control row (Curator only) checks Curator's own view; the others lockgate's too.
        LeaderElection observer = kinds.indexOf('L') >= 0 ? lockgate(1).getElection(path) : null;
        LeaderLatch curatorObserver = new LeaderLatch(inspector, path, "observer"); // never started: reads only
        Occupancy occ = new Occupancy(1);
        try {
            List<Long> terms = new ArrayList<>();
            terms.add(get(parties.get(0).begin(occ)));
            List<Future<Long>> waiting = new ArrayList<>();
            for (int i = 1; i < parties.size(); i++) {
                waiting.add(parties.get(i).begin(occ));
                awaitChildren(path, i + 1);
            }
            for (int k = 0; k < parties.size(); k++) {
                String leader = parties.get(k).label;
                long term = terms.get(k);
                if (observer != null) {
                    Optional<Leader> seen = observer.observe();
                    assertTrue(seen.isPresent(), "lockgate observes a leader while " + leader + " leads");
                    assertEquals(leader, seen.get().value(), "lockgate observes the leader");
                    assertEquals(term, seen.get().term(), "the term is the leader node's creation zxid");
                }
                assertEquals(leader, curatorObserver.getLeader().getId(), "Curator's getLeader() names it");
                assertTrue(curatorObserver.getLeader().isLeader());
                Thread.sleep(k == 0 ? QUIET_MS : 0);
                assertEquals(k + 1, occ.grants().size(), "one leader at a time: " + occ.grants());
                parties.get(k).end(occ);
                if (k + 1 < parties.size()) {
                    List<String> g = occ.awaitGrants(k + 2, ZkParty.STEP.toMillis());
                    assertEquals(parties.get(k + 1).label, g.get(k + 1), "the next candidate in arrival order: " + g);
                    terms.add(get(waiting.get(k)));
                }
            }
            assertIncreasing(terms, occ.grants());
            assertEquals(List.of(), occ.violations());
            awaitChildren(path, 0);
            if (observer != null) {
                assertTrue(observer.observe().isEmpty(), "nobody leads after everyone resigned");
            }
        } finally {
            closeAll(parties);
        }
    }
}
