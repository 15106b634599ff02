package io.lockgate;

import java.util.concurrent.ConcurrentHashMap;

/**
 * The holds taken through the {@link java.util.concurrent.locks.Lock} interface, per client,
 * keyed by (lock name, kind, thread): the state behind "the {@code Lock} facade is owned by the
 * thread", as in {@code ReentrantLock}, Redisson's {@code RLock} and Curator's
 * {@code InterProcessMutex}. It lives in the client rather than in the lock object so that
 * {@code lock()} through one {@code getLock(name)} object and {@code unlock()} through a fresh
 * {@code getLock(name)} object on the same thread work (the Redisson idiom), and so that two
 * threads sharing one lock object never share a hold.
 *
 * <p>Only the owning thread reads or changes its own entries (every method works on the current
 * thread's), so a hold's count needs no synchronization.
 */
final class ThreadHolds {
    /** The kinds of hold; each names which kinds of the same lock name it would wait for. */
    enum Kind {
        MUTEX, READ, WRITE, REDLOCK,
        /** A semaphore permit: no {@code Lock} interface, and a permit never waits for one thread's hold. */
        SEMAPHORE;

        /** Whether a blocking acquisition of this kind waits for a hold of kind {@code held}. */
        boolean waitsFor(Kind held) {
            return switch (this) {
                case SEMAPHORE -> false;
                case READ -> held == WRITE;
                case WRITE -> held == READ || held == WRITE;
                default -> held == this;
            };
        }

        /** How messages name it. */
        String label() {
            return switch (this) {
                case READ -> "read lock";
                case WRITE -> "write lock";
                case REDLOCK -> "Redlock";
                case SEMAPHORE -> "semaphore";
                default -> "lock";
            };
        }
    }

    /** One thread's hold of one lock: its lease and how many times it was entered. */
    static final class Hold {
        final AbstractLease lease;
        int count = 1;

        Hold(AbstractLease lease) {
            this.lease = lease;
        }
    }

    /** A thread's hold's key; threads compare by identity (Thread does not override equals). */
    private record Key(String name, Kind kind, Thread thread) {}

    private final ConcurrentHashMap<Key, Hold> holds = new ConcurrentHashMap<>();

    private static Key key(String name, Kind kind) {
        return new Key(name, kind, Thread.currentThread());
    }

    /** The current thread's hold of ({@code name}, {@code kind}), or {@code null}. */
    Hold get(String name, Kind kind) {
        return holds.get(key(name, kind));
    }

    /** Records a first hold of the current thread. */
    void put(String name, Kind kind, AbstractLease lease) {
        holds.put(key(name, kind), new Hold(lease));
    }

    /** Removes the current thread's hold. */
    void remove(String name, Kind kind) {
        holds.remove(key(name, kind));
    }

    /**
     * Throws {@link LockAlreadyHeldException} if the current thread holds, through the
     * {@code Lock} interface, a live hold of {@code name} that a blocking acquisition of
     * {@code kind} would wait for: only this thread could unlock it, and it would be waiting.
     * {@code sameKindToo}: false for {@code lock()}, which re-enters its own kind instead.
     */
    void checkNoSelfWait(String name, Kind kind, boolean sameKindToo) {
        for (Kind held : Kind.values()) {
            if ((held == kind && !sameKindToo) || !kind.waitsFor(held)) {
                continue;
            }
            Hold h = get(name, held);
            if (h != null && h.lease.isHeld()) {
                throw new LockAlreadyHeldException("the current thread holds the " + held.label() + " '" + name
                    + "' through the Lock interface; acquiring the " + kind.label()
                    + " would wait for itself (unlock() it first)", false);
            }
        }
    }
}
