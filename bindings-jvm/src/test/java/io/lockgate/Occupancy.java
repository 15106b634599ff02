package io.lockgate;

import java.util.ArrayList;
import java.util.List;

/**
 * Who holds a ZooKeeper lock in an interoperability scenario, as the parties themselves see it:
 * every grant enters, every release leaves (before it deletes its node, so a later grant can
 * never be counted beside it by mistake). It records the grant order and every moment the
 * recipe's rule was broken: an exclusive holder beside anyone, a shared one beside a writer, or
 * more holders than {@code capacity} (a semaphore's permits).
 */
final class Occupancy {
    private final int capacity;
    private final List<String> grants = new ArrayList<>();
    private final List<String> holders = new ArrayList<>();
    private final List<String> violations = new ArrayList<>();
    private boolean exclusiveHeld;

    Occupancy(int capacity) {
        this.capacity = capacity;
    }

    synchronized void enter(ZkParty p) {
        grants.add(p.label);
        if (p.exclusive && !holders.isEmpty()) {
            violations.add(p.label + " (exclusive) granted while " + holders + " held");
        } else if (!p.exclusive && exclusiveHeld) {
            violations.add(p.label + " (shared) granted while the exclusive " + holders + " held");
        }
        holders.add(p.label);
        exclusiveHeld |= p.exclusive;
        if (holders.size() > capacity) {
            violations.add(holders + " held at once, more than " + capacity);
        }
        notifyAll();
    }

    synchronized void leave(ZkParty p) {
        holders.remove(p.label);
        if (p.exclusive) {
            exclusiveHeld = false;
        }
    }

    /** The grants so far, in the order they happened. */
    synchronized List<String> grants() {
        return new ArrayList<>(grants);
    }

    synchronized List<String> violations() {
        return new ArrayList<>(violations);
    }

    /** Waits until {@code n} grants happened (at most {@code timeoutMs}); the grants then. */
    synchronized List<String> awaitGrants(int n, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (grants.size() < n) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                throw new AssertionError("waited " + timeoutMs + " ms for grant #" + n + "; grants so far "
                    + grants + ", holders " + holders);
            }
            wait(left);
        }
        return new ArrayList<>(grants);
    }
}
