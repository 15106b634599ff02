package io.lockgate;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.zookeeper.data.Stat;

/**
 * One contender of an interoperability scenario: a lockgate handle or the Curator recipe it
 * replaces, on one ZooKeeper path. Each party runs on its own thread, because Curator's locks
 * belong to the thread that acquired them; the test drives it with {@link #begin}, {@link #end}
 * and {@link #attempt}. The fencing token of a grant is the holder node's creation zxid: lockgate
 * reports it, and for Curator the test reads it from the node Curator created.
 */
abstract class ZkParty implements AutoCloseable {
    /** How long any single step may take before the scenario fails. */
    static final Duration STEP = Duration.ofSeconds(20);

    /** {@code L1}, {@code C2}, ...: the kind (lockgate or Curator) and the position in the scenario. */
    final String label;
    /** A writer, mutex holder or leader (true), or a reader or semaphore permit (false). */
    final boolean exclusive;
    private final ExecutorService thread;
    private volatile boolean held;

    ZkParty(String label, boolean exclusive) {
        this.label = label;
        this.exclusive = exclusive;
        this.thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "zk-party-" + label);
            t.setDaemon(true);
            return t;
        });
    }

    /** Waits for the grant (at most {@link #STEP}); returns its fencing token. */
    protected abstract long acquire() throws Exception;

    /** One attempt waiting at most {@code wait}: whether it was granted (then it holds). */
    protected abstract boolean tryAcquire(Duration wait) throws Exception;

    /** Gives the grant back (deletes its node). */
    protected abstract void release() throws Exception;

    /** Starts waiting for the grant on the party's thread; {@code occupancy} sees it on grant. */
    Future<Long> begin(Occupancy occupancy) {
        return thread.submit(() -> {
            long token = acquire();
            held = true;
            occupancy.enter(this);
            return token;
        });
    }

    /** Releases on the party's thread (leaving the occupancy first), and waits for that. */
    void end(Occupancy occupancy) {
        run(() -> {
            occupancy.leave(this);
            held = false;
            release();
            return null;
        });
    }

    /** One attempt of at most {@code wait} on the party's thread; a grant enters {@code occupancy}. */
    boolean attempt(Duration wait, Occupancy occupancy) {
        return run(() -> {
            boolean granted = tryAcquire(wait);
            if (granted) {
                held = true;
                occupancy.enter(this);
            }
            return granted;
        });
    }

    private <T> T run(java.util.concurrent.Callable<T> step) {
        try {
            return thread.submit(step).get(STEP.toMillis() * 2, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw new AssertionError(label + ": " + e.getCause(), e.getCause());
        } catch (TimeoutException e) {
            throw new AssertionError(label + ": step did not finish in " + STEP.multipliedBy(2), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Releases a grant still held (a failed scenario) and stops the thread. */
    @Override
    public void close() {
        if (held) {
            try {
                thread.submit(() -> {
                    release();
                    return null;
                }).get(10, TimeUnit.SECONDS);
            } catch (Exception ignored) {
                // cleanup after a failure: the assertion that failed is what matters
            }
        }
        thread.shutdownNow();
    }

    @Override
    public String toString() {
        return label;
    }

    /** The creation zxid of {@code path}: what Curator's grant would carry as a fencing token. */
    static long czxid(CuratorFramework curator, String path) throws Exception {
        Stat stat = curator.checkExists().forPath(path);
        if (stat == null) {
            throw new AssertionError("the holder's node " + path + " does not exist");
        }
        return stat.getCzxid();
    }

    static long token(Lease lease) {
        return lease.fencingToken().orElseThrow(() -> new AssertionError("a ZooKeeper grant without a fencing token"));
    }

    // ------------------------------------------------------------------------------ lockgate

    /** A lockgate mutex, or one half of a read-write lock: a {@link DistributedLock}. */
    static final class LockgateLock extends ZkParty {
        private final DistributedLock lock;
        private Lease lease;

        LockgateLock(String label, DistributedLock lock, boolean exclusive) {
            super(label, exclusive);
            this.lock = lock;
        }

        static LockgateLock mutex(String label, LockgateClient client, String path) {
            return new LockgateLock(label, client.getLock(path), true);
        }

        static LockgateLock read(String label, LockgateClient client, String path) {
            return new LockgateLock(label, client.getReadWriteLock(path).readLock(), false);
        }

        static LockgateLock write(String label, LockgateClient client, String path) {
            return new LockgateLock(label, client.getReadWriteLock(path).writeLock(), true);
        }

        @Override
        protected long acquire() throws Exception {
            lease = lock.acquire(STEP);
            return token(lease);
        }

        @Override
        protected boolean tryAcquire(Duration wait) throws Exception {
            Optional<Lease> got;
            if (wait.isZero()) {
                got = lock.tryAcquire();
            } else {
                try {
                    got = Optional.of(lock.acquire(wait));
                } catch (LockTimeoutException e) {
                    got = Optional.empty();
                }
            }
            got.ifPresent(l -> lease = l);
            return got.isPresent();
        }

        @Override
        protected void release() {
            lease.close();
            lease = null;
        }
    }

    /** A lockgate semaphore permit. */
    static final class LockgatePermit extends ZkParty {
        private final DistributedSemaphore semaphore;
        private Lease lease;

        LockgatePermit(String label, LockgateClient client, String path, int permits) {
            super(label, false);
            this.semaphore = client.getSemaphore(path, permits);
        }

        @Override
        protected long acquire() throws Exception {
            lease = semaphore.acquire(STEP);
            return token(lease);
        }

        @Override
        protected boolean tryAcquire(Duration wait) throws Exception {
            Optional<Lease> got = wait.isZero() ? semaphore.tryAcquire() : semaphore.tryAcquire(wait);
            got.ifPresent(l -> lease = l);
            return got.isPresent();
        }

        @Override
        protected void release() {
            lease.close();
            lease = null;
        }
    }

    /** A lockgate election candidate whose value is its label. */
    static final class LockgateCandidate extends ZkParty {
        private final LeaderElection election;
        private Lease lease;

        LockgateCandidate(String label, LockgateClient client, String path) {
            super(label, true);
            this.election = client.getElection(path);
        }

        @Override
        protected long acquire() throws Exception {
            lease = election.campaign(label, STEP);
            return token(lease);
        }

        @Override
        protected boolean tryAcquire(Duration wait) throws Exception {
            Optional<Lease> got;
            if (wait.isZero()) {
                got = election.tryCampaign(label);
            } else {
                try {
                    got = Optional.of(election.campaign(label, wait));
                } catch (LockTimeoutException e) {
                    got = Optional.empty();
                }
            }
            got.ifPresent(l -> lease = l);
            return got.isPresent();
        }

        @Override
        protected void release() {
            lease.close();
            lease = null;
        }
    }

    // -------------------------------------------------------------------------------- Curator

    /** Curator's {@link InterProcessMutex}, with its node path visible for the fencing check. */
    static final class CuratorMutex extends ZkParty {
        private final CuratorFramework curator;
        private final Mutex mutex;

        /** {@code getLockPath()} is protected in Curator: the node this thread holds. */
        private static final class Mutex extends InterProcessMutex {
            Mutex(CuratorFramework client, String path) {
                super(client, path);
            }

            String nodePath() {
                return getLockPath();
            }
        }

        CuratorMutex(String label, CuratorFramework curator, String path) {
            super(label, true);
            this.curator = curator;
            this.mutex = new Mutex(curator, path);
        }

        @Override
        protected long acquire() throws Exception {
            if (!mutex.acquire(STEP.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError(label + " (Curator) timed out");
            }
            return czxid(curator, mutex.nodePath());
        }

        @Override
        protected boolean tryAcquire(Duration wait) throws Exception {
            return mutex.acquire(wait.toMillis(), TimeUnit.MILLISECONDS);
        }

        @Override
        protected void release() throws Exception {
            mutex.release();
        }
    }

    /** One half of Curator's {@link InterProcessReadWriteLock} (its own instance per party). */
    static final class CuratorReadWrite extends ZkParty {
        private final CuratorFramework curator;
        private final InterProcessReadWriteLock rw;

        CuratorReadWrite(String label, CuratorFramework curator, String path, boolean write) {
            super(label, write);
            this.curator = curator;
            this.rw = new InterProcessReadWriteLock(curator, path);
        }

        private InterProcessMutex half() {
            return exclusive ? rw.writeLock() : rw.readLock();
        }

        private String nodePath() {
            return exclusive ? rw.writeLock().getLockPath() : rw.readLock().getLockPath();
        }

        @Override
        protected long acquire() throws Exception {
            if (!half().acquire(STEP.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError(label + " (Curator) timed out");
            }
            return czxid(curator, nodePath());
        }

        @Override
        protected boolean tryAcquire(Duration wait) throws Exception {
            return half().acquire(wait.toMillis(), TimeUnit.MILLISECONDS);
        }

        @Override
        protected void release() throws Exception {
            half().release();
        }
    }

    /** One permit of Curator's {@link InterProcessSemaphoreV2}. */
    static final class CuratorPermit extends ZkParty {
        private final CuratorFramework curator;
        private final InterProcessSemaphoreV2 semaphore;
        private final String leases;
        private org.apache.curator.framework.recipes.locks.Lease lease;

        CuratorPermit(String label, CuratorFramework curator, String path, int permits) {
            super(label, false);
            this.curator = curator;
            this.semaphore = new InterProcessSemaphoreV2(curator, path, permits);
            this.leases = path + "/leases";
        }

        @Override
        protected long acquire() throws Exception {
            lease = semaphore.acquire(STEP.toMillis(), TimeUnit.MILLISECONDS);
            if (lease == null) {
                throw new AssertionError(label + " (Curator) timed out");
            }
            return czxid(curator, leases + "/" + lease.getNodeName()); // a name, not a path
        }

        @Override
        protected boolean tryAcquire(Duration wait) throws Exception {
            lease = semaphore.acquire(wait.toMillis(), TimeUnit.MILLISECONDS);
            return lease != null;
        }

        @Override
        protected void release() throws Exception {
            lease.close();
            lease = null;
        }
    }

    /** Curator's {@link LeaderLatch} whose participant id is its label. */
    static final class CuratorLatch extends ZkParty {
        private final CuratorFramework curator;
        private final String path;
        private volatile LeaderLatch latch;

        CuratorLatch(String label, CuratorFramework curator, String path) {
            super(label, true);
            this.curator = curator;
            this.path = path;
        }

        /** The latch while it campaigns or leads (for {@code getLeader()}), else null. */
        LeaderLatch latch() {
            return latch;
        }

        @Override
        protected long acquire() throws Exception {
            latch = new LeaderLatch(curator, path, label);
            latch.start();
            if (!latch.await(STEP.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError(label + " (Curator) was not elected");
            }
            return czxid(curator, latch.getOurPath());
        }

        @Override
        protected boolean tryAcquire(Duration wait) throws Exception {
            latch = new LeaderLatch(curator, path, label);
            latch.start();
            if (latch.await(Math.max(1, wait.toMillis()), TimeUnit.MILLISECONDS)) {
                return true;
            }
            latch.close(); // withdraws the candidacy, as lockgate's attempt does
            latch = null;
            return false;
        }

        @Override
        protected void release() throws Exception {
            latch.close();
            latch = null;
        }
    }
}
