package io.lockgate;

import io.lockgate.internal.ffi.NativeLock;
import io.lockgate.internal.ffi.NativeReadWriteLock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.function.Function;

/**
 * A named distributed read-write lock (Redis): many readers or one writer, served in arrival
 * order from one queue and woken by the releases themselves. Replaces Redisson's
 * {@code RReadWriteLock} and Curator's {@code InterProcessReadWriteLock}.
 *
 * <pre>{@code
 * DistributedReadWriteLock rw = client.getReadWriteLock("catalog");
 * try (Lease read = rw.readLock().acquire(Duration.ofSeconds(5))) {
 *     render(catalog);                               // other readers may hold it too
 * }
 * try (Lease write = rw.writeLock().acquire(Duration.ofSeconds(5))) {
 *     store.update(catalog, write.fencingToken());   // nobody else holds it
 * }
 * }</pre>
 *
 * <p>Both halves are {@link DistributedLock}s: leases (owned by handle and lease), async
 * variants and the {@link java.util.concurrent.locks.Lock} interface (owned by the thread) work
 * as for the mutex. Write grants carry fencing tokens larger than every earlier grant's. A
 * thread holding one half through the {@code Lock} interface that asks for the half that would
 * wait for it (write while reading, read while writing) gets {@link LockAlreadyHeldException}
 * instead of waiting for itself: there is no upgrade or downgrade.
 *
 * <p><b>Writers first</b> (the default): a writer waiting in the queue blocks readers that
 * arrive after it, so a steady stream of readers cannot starve writers.
 * {@link #withWritersFirst(boolean) withWritersFirst(false)} lets new readers join the current
 * readers past queued writers (more read throughput, at the writers' expense). Every client of a
 * name must use the same setting: while the lock is in use the server rejects the other one
 * with {@link LockInvalidArgumentException}.
 *
 * <p>With {@link LockOptions.Builder#reentrant(Boolean) reentrant(true)} each half re-enters:
 * its lease API while <em>that half's object</em> holds it, its {@code Lock} interface while the
 * <em>thread</em> holds it (a read hold and a write hold never merge).
 */
public final class DistributedReadWriteLock implements ReadWriteLock {
    /** Makes a fresh read-write handle with these options and the given writers-first setting. */
    private final Function<Boolean, NativeReadWriteLock> handles;
    /** The same, non-reentrant: for each first {@code Lock}-interface hold of a thread. */
    private final Function<Boolean, NativeReadWriteLock> perThreadHandles;
    private final ClientState state;
    private final String name;
    private final LockOptions options;
    private final boolean writersFirst;
    private final DistributedLock read;
    private final DistributedLock write;

    DistributedReadWriteLock(Function<Boolean, NativeReadWriteLock> handles,
                             Function<Boolean, NativeReadWriteLock> perThreadHandles,
                             String name, LockOptions options, boolean writersFirst, ClientState state) {
        this.handles = handles;
        this.perThreadHandles = perThreadHandles;
        this.state = state;
        this.name = name;
        this.options = options;
        this.writersFirst = writersFirst;
        NativeReadWriteLock rw = handles.apply(writersFirst);
        try {
            this.read = new DistributedLock(rw.read(), () -> half(perThreadHandles, true), name, options, "read",
                ThreadHolds.Kind.READ, state);
            this.write = new DistributedLock(rw.write(), () -> half(perThreadHandles, false), name, options, "write",
                ThreadHolds.Kind.WRITE, state);
        } finally {
            rw.destroy(); // the halves outlive the handle that made them
        }
    }

    /** One half of a fresh read-write handle. */
    private NativeLock half(Function<Boolean, NativeReadWriteLock> from, boolean readHalf) {
        NativeReadWriteLock fresh = from.apply(writersFirst);
        try {
            return readHalf ? fresh.read() : fresh.write();
        } finally {
            fresh.destroy();
        }
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
     * This lock with readers that do ({@code true}, the default) or do not ({@code false}) wait
     * behind queued writers. Returns a new object with its own handles (which do not share this
     * object's leases); this one is unchanged.
     */
    public DistributedReadWriteLock withWritersFirst(boolean writersFirst) {
        return new DistributedReadWriteLock(handles, perThreadHandles, name, options, writersFirst, state);
    }

    /** Whether queued writers block readers that arrive after them. */
    public boolean isWritersFirst() {
        return writersFirst;
    }

    /** The lock's name. */
    public String getName() {
        return name;
    }

    /** The options both halves were made with. */
    public LockOptions options() {
        return options;
    }

    @Override
    public String toString() {
        return "DistributedReadWriteLock{name=" + name + (writersFirst ? "" : ", writersFirst=false")
            + (options.isReentrant() ? ", reentrant" : "") + "}";
    }
}
