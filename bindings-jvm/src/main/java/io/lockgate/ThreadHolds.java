package io.lockgate;

import io.lockgate.internal.ffi.NativeLock;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A client's {@link java.util.concurrent.locks.Lock}-interface holds by (lock name, kind,
 * thread): "the thread owns the lock", as in {@code ReentrantLock}. Kept in the client, not the
 * lock object, so any lock object of a name unlocks (the Redisson idiom) and threads sharing an
 * object never share a hold. Only the owning thread touches its entries: counts need no locking.
 */
final class ThreadHolds {
    /** The kinds of hold; each names which kinds of the same lock name it would wait for. */
    enum Kind {
        MUTEX, READ, WRITE,
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
                case SEMAPHORE -> "semaphore";
                default -> "lock";
            };
        }
    }

    /**
     * One thread's hold of one lock: its lease, how many times it was entered, and the per-thread
     * handle it was acquired through with the idle handles that handle goes back to once unlocked.
     */
    static final class Hold {
        final Lease lease;
        final NativeLock handle;
        final IdleHandles idle;
        int count = 1;

        Hold(Lease lease, NativeLock handle, IdleHandles idle) {
            this.lease = lease;
            this.handle = handle;
            this.idle = idle;
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

    /** Records a first hold of the current thread, acquired through {@code handle} of {@code idle}. */
    void put(String name, Kind kind, Lease lease, NativeLock handle, IdleHandles idle) {
        holds.put(key(name, kind), new Hold(lease, handle, idle));
    }

    /** Removes the current thread's hold. */
    void remove(String name, Kind kind) {
        holds.remove(key(name, kind));
    }

    /**
     * {@link LockAlreadyHeldException} if a blocking acquisition of {@code kind} would wait for a
     * live hold of this thread (which only it could unlock). {@code sameKindToo}: false for
     * {@code lock()}, which re-enters its own kind instead.
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
