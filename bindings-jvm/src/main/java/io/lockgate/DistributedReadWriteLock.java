package io.lockgate;

import io.lockgate.internal.ffi.NativeLock;
import java.util.List;
import java.util.concurrent.locks.ReadWriteLock;

/**
 * A named distributed read-write lock: many readers or one writer, served in arrival order from
 * one queue and woken by the releases themselves (backends with {@code readWrite} in
 * {@link LockgateClient#capabilities()}). Replaces Redisson's {@code RReadWriteLock} and Curator's
 * {@code InterProcessReadWriteLock}.
 *
 * <pre>{@code
 * DistributedReadWriteLock rw = client.getReadWriteLock("catalog");
 * try (Lease read = rw.readLock().acquire(Duration.ofSeconds(5))) { render(catalog); }
 * try (Lease write = rw.writeLock().acquire(Duration.ofSeconds(5))) { store.update(catalog); }
 * }</pre>
 *
 * <p>Both halves are {@link DistributedLock}s (leases, async variants, the {@code Lock}
 * interface). Write grants carry fencing tokens. A thread holding one half through the
 * {@code Lock} interface that asks for the half that would wait for it gets
 * {@link LockAlreadyHeldException}: there is no upgrade or downgrade. <b>Writers first</b> (the
 * default): a queued writer blocks readers that arrive after it; every client of a name must use
 * the same setting (else {@link LockInvalidArgumentException} while the lock is in use). With
 * {@code reentrant(true)} each half re-enters, per object (leases) or per thread ({@code Lock}).
 */
public final class DistributedReadWriteLock implements ReadWriteLock {
    /** Makes fresh {@code [read, write]} handles (non-reentrant ones for a thread's first hold). */
    interface Halves {
        List<NativeLock> make(boolean perThread, boolean writersFirst);
    }

    private final Halves halves;
    private final String name;
    private final LockOptions options;
    private final boolean writersFirst;
    private final DistributedLock read;
    private final DistributedLock write;
    private final ThreadHolds threadHolds;
    private final OpenLeases openLeases;

    DistributedReadWriteLock(Halves halves, String name, LockOptions options, boolean writersFirst,
                             ThreadHolds threadHolds, OpenLeases openLeases) {
        this.halves = halves;
        this.name = name;
        this.options = options;
        this.writersFirst = writersFirst;
        List<NativeLock> rw = halves.make(false, writersFirst);
        this.read = new DistributedLock(rw.get(0), () -> half(0), name, options, ThreadHolds.Kind.READ,
            threadHolds, openLeases);
        this.write = new DistributedLock(rw.get(1), () -> half(1), name, options, ThreadHolds.Kind.WRITE,
            threadHolds, openLeases);
        this.threadHolds = threadHolds;
        this.openLeases = openLeases;
    }

    /** Half {@code i} of fresh per-thread handles; the other half is freed. */
    private NativeLock half(int i) {
        List<NativeLock> fresh = halves.make(true, writersFirst);
        fresh.get(1 - i).destroy();
        return fresh.get(i);
    }

    /** The shared half: many readers hold it at once, never beside a writer. Always the same object. */
    @Override
    public DistributedLock readLock() {
        return read;
    }

    /** The exclusive half. Always the same object. */
    @Override
    public DistributedLock writeLock() {
        return write;
    }

    /**
     * This lock with readers that do ({@code true}, the default) or do not wait behind queued
     * writers: a new object with its own handles; this one is unchanged.
     *
     * @param writersFirst whether readers wait behind queued writers (every client of the lock must agree)
     * @return a new read-write lock object on the same name
     */
    public DistributedReadWriteLock withWritersFirst(boolean writersFirst) {
        return new DistributedReadWriteLock(halves, name, options, writersFirst, threadHolds, openLeases);
    }

    /**
     * Whether queued writers block readers that arrive after them.
     *
     * @return whether queued writers block later readers
     */
    public boolean isWritersFirst() {
        return writersFirst;
    }

    /**
     * The lock's name.
     *
     * @return the lock's name
     */
    public String getName() {
        return name;
    }

    /**
     * The options both halves were made with.
     *
     * @return the options both halves were made with
     */
    public LockOptions options() {
        return options;
    }

    @Override
    public String toString() {
        return "DistributedReadWriteLock{name=" + name + (writersFirst ? "" : ", writersFirst=false")
            + (options.isReentrant() ? ", reentrant" : "") + "}";
    }
}
