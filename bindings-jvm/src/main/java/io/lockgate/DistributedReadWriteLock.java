package io.lockgate;

import io.lockgate.internal.ffi.NativeReadWriteLock;
import java.util.concurrent.locks.ReadWriteLock;

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
 * <p>Both halves are {@link DistributedLock}s: leases, async variants and the
 * {@link java.util.concurrent.locks.Lock} interface work as for the mutex, with the handle (not
 * the thread) as owner. Write grants carry fencing tokens larger than every earlier grant's.
 *
 * <p><b>Writers first</b> (the default): a writer waiting in the queue blocks readers that
 * arrive after it, so a steady stream of readers cannot starve writers.
 * {@link #withWritersFirst(boolean) withWritersFirst(false)} lets new readers join the current
 * readers past queued writers (more read throughput, at the writers' expense).
 *
 * <p>With {@link LockOptions.Builder#reentrant(Boolean) reentrant(true)} each half re-enters
 * while <em>that half's object</em> holds it (a read hold and a write hold never merge: a reader
 * that asks for the write lock waits for every reader, itself included, to leave).
 */
public final class DistributedReadWriteLock implements ReadWriteLock {
    private final NativeReadWriteLock rw;
    private final String name;
    private final LockOptions options;
    private final boolean writersFirst;
    private final DistributedLock read;
    private final DistributedLock write;

    DistributedReadWriteLock(NativeReadWriteLock rw, String name, LockOptions options, boolean writersFirst) {
        this.rw = rw;
        this.name = name;
        this.options = options;
        this.writersFirst = writersFirst;
        this.read = new DistributedLock(rw.read(), name, options, "read", false);
        this.write = new DistributedLock(rw.write(), name, options, "write", true);
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
     * behind queued writers. Returns a new object with its own handles; this one is unchanged.
     */
    public DistributedReadWriteLock withWritersFirst(boolean writersFirst) {
        return new DistributedReadWriteLock(rw.withWritersFirst(writersFirst), name, options, writersFirst);
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
