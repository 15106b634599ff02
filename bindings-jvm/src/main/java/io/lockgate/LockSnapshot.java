package io.lockgate;

import io.lockgate.internal.ffi.NativeHolder;
import io.lockgate.internal.ffi.NativeSnapshot;
import io.lockgate.internal.ffi.NativeWaiter;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * One lock as read from its server in one request ({@link LockgateClient#inspect(String, String)},
 * {@link DistributedLock#inspect()}): its holders and its waiters in queue order. What a backend
 * does not record is empty (PROTOCOL.md §14). Racy by nature: for humans and dashboards; to
 * decide whether to write, use the fencing token.
 *
 * @param kind    what it was read as: {@code mutex}, {@code rw}, {@code semaphore}, {@code election}
 * @param holders the holders (a semaphore's permits taken, the readers, an election's leader)
 * @param waiters the waiters in queue order (none where waiters poll: memcached, Redlock)
 * @param permits a semaphore's permit count where the server records it
 */
public record LockSnapshot(String kind, List<Holder> holders, List<Waiter> waiters, OptionalLong permits) {

    /**
     * One holder.
     *
     * @param label        the label its client stored, if any
     * @param fencingToken its grant's fencing token, where the backend issues them
     * @param heldFor      how long it has held, by the server's clock
     * @param remaining    its remaining lease as the server would enforce it
     * @param shared       a reader or a permit (else alone: a mutex, writer or leader)
     * @param value        an election leader's published value
     * @param holds        this client's reentrant holds on it (empty for another client's)
     */
    public record Holder(Optional<String> label, OptionalLong fencingToken, Optional<Duration> heldFor,
                         Optional<Duration> remaining, boolean shared, Optional<String> value, OptionalLong holds) {}

    /**
     * One waiter.
     *
     * @param label      the label its client stored, if any
     * @param waitingFor how long it has waited, by the server's clock
     * @param shared     waiting to read or for a permit (else alone)
     */
    public record Waiter(Optional<String> label, Optional<Duration> waitingFor, boolean shared) {}

    /**
     * Whether anyone holds it (Redisson's {@code isLocked}).
     *
     * @return whether it had a holder when read
     */
    public boolean isLocked() {
        return !holders.isEmpty();
    }

    /**
     * The longest remaining lease among the holders, where known (Redisson's {@code remainTimeToLive}).
     *
     * @return the longest remaining lease, or empty when nobody holds it or the backend does not say
     */
    public Optional<Duration> remaining() {
        return holders.stream().flatMap(h -> h.remaining().stream()).max(Duration::compareTo);
    }

    static LockSnapshot of(NativeSnapshot s) {
        return new LockSnapshot(
            s.getKind(),
            s.getHolders().stream().map(LockSnapshot::holder).toList(),
            s.getWaiters().stream().map(LockSnapshot::waiter).toList(),
            optLong(s.getPermits()));
    }

    private static Holder holder(NativeHolder h) {
        return new Holder(Optional.ofNullable(h.getLabel()), optLong(h.getFencingToken()), nanos(h.getHeldForNanos()),
            nanos(h.getRemainingNanos()), h.getShared(), Optional.ofNullable(h.getValue()), optLong(h.getHolds()));
    }

    private static Waiter waiter(NativeWaiter w) {
        return new Waiter(Optional.ofNullable(w.getLabel()), nanos(w.getWaitingForNanos()), w.getShared());
    }

    private static OptionalLong optLong(Long v) {
        return v == null ? OptionalLong.empty() : OptionalLong.of(v);
    }

    private static Optional<Duration> nanos(Long v) {
        return Optional.ofNullable(v).map(Duration::ofNanos);
    }
}
