package io.lockgate;

import io.lockgate.internal.ffi.NativeLockOptions;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/**
 * How a lock behaves once acquired and while waiting. Immutable; unset fields take the core's
 * defaults (a 30 s lease renewed by a watchdog every third of it, no default wait limit, a 10 s
 * waiter-entry lease). Values are validated by the core when the lock is created, and a bad one
 * is a {@link LockInvalidArgumentException}.
 *
 * <pre>{@code
 * LockOptions.fixedLease(Duration.ofSeconds(10));            // frees itself 10 s after acquiring
 * LockOptions.builder().lease(Duration.ofSeconds(5)).waitTimeout(Duration.ofSeconds(2)).build();
 * }</pre>
 */
public final class LockOptions {
    private static final LockOptions DEFAULTS = new Builder().build();

    private final Duration lease;
    private final Boolean autoRenew;
    private final Duration waitTimeout;
    private final Duration entryTtl;
    private final Boolean reentrant;

    private LockOptions(Builder b) {
        this.lease = b.lease;
        this.autoRenew = b.autoRenew;
        this.waitTimeout = b.waitTimeout;
        this.entryTtl = b.entryTtl;
        this.reentrant = b.reentrant;
    }

    /** The core's defaults: a 30 s lease kept alive by the watchdog until released. */
    public static LockOptions defaults() {
        return DEFAULTS;
    }

    /** A lease that is not renewed: the lock frees itself {@code lease} after acquisition. */
    public static LockOptions fixedLease(Duration lease) {
        return builder().lease(lease).autoRenew(false).build();
    }

    /** A lease of {@code lease} that the watchdog renews every {@code lease / 3} while held. */
    public static LockOptions renewedLease(Duration lease) {
        return builder().lease(lease).autoRenew(true).build();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder starting from these options. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.lease = lease;
        b.autoRenew = autoRenew;
        b.waitTimeout = waitTimeout;
        b.entryTtl = entryTtl;
        b.reentrant = reentrant;
        return b;
    }

    /** The lease on the server, if set (else the core's default, 30 s). */
    public Optional<Duration> lease() {
        return Optional.ofNullable(lease);
    }

    /** Whether the watchdog renews the lease, if set (else the core's default, {@code true}). */
    public Optional<Boolean> autoRenew() {
        return Optional.ofNullable(autoRenew);
    }

    /** The wait used by {@link DistributedLock#lock()} and {@link DistributedLock#acquire()}; empty = forever. */
    public Optional<Duration> waitTimeout() {
        return Optional.ofNullable(waitTimeout);
    }

    /** How long a crashed waiter's queue entry survives, if set (else the core's default, 10 s). */
    public Optional<Duration> entryTtl() {
        return Optional.ofNullable(entryTtl);
    }

    /**
     * Whether the handle is reentrant, if set (else not). Only mutexes and read-write locks can
     * be reentrant; see {@link Builder#reentrant(Boolean)}.
     */
    public Optional<Boolean> reentrant() {
        return Optional.ofNullable(reentrant);
    }

    /** Whether {@link #reentrant()} is set to {@code true}. */
    boolean isReentrant() {
        return Boolean.TRUE.equals(reentrant);
    }

    NativeLockOptions toNative() {
        return new NativeLockOptions(
            Futures.secsOrNull(lease),
            autoRenew,
            Futures.secsOrNull(waitTimeout),
            Futures.secsOrNull(entryTtl),
            reentrant);
    }

    @Override
    public String toString() {
        return "LockOptions{lease=" + (lease == null ? "default" : lease)
            + ", autoRenew=" + (autoRenew == null ? "default" : autoRenew)
            + ", waitTimeout=" + (waitTimeout == null ? "forever" : waitTimeout)
            + ", entryTtl=" + (entryTtl == null ? "default" : entryTtl)
            + (reentrant == null ? "" : ", reentrant=" + reentrant) + "}";
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof LockOptions)) {
            return false;
        }
        LockOptions x = (LockOptions) o;
        return Objects.equals(lease, x.lease) && Objects.equals(autoRenew, x.autoRenew)
            && Objects.equals(waitTimeout, x.waitTimeout) && Objects.equals(entryTtl, x.entryTtl)
            && Objects.equals(reentrant, x.reentrant);
    }

    @Override
    public int hashCode() {
        return Objects.hash(lease, autoRenew, waitTimeout, entryTtl, reentrant);
    }

    /** Builds {@link LockOptions}; {@code null} means "the core's default". */
    public static final class Builder {
        private Duration lease;
        private Boolean autoRenew;
        private Duration waitTimeout;
        private Duration entryTtl;
        private Boolean reentrant;

        private Builder() {}

        /** The lease on the server (at least 10 ms, at most 30 days). */
        public Builder lease(Duration lease) {
            this.lease = lease;
            return this;
        }

        /** Whether a watchdog keeps the lease alive until release (Redisson's default behaviour). */
        public Builder autoRenew(Boolean autoRenew) {
            this.autoRenew = autoRenew;
            return this;
        }

        /** Default wait of {@code lock()} / {@code acquire()}; {@code null} waits until acquired. */
        public Builder waitTimeout(Duration waitTimeout) {
            this.waitTimeout = waitTimeout;
            return this;
        }

        /** Lease of a waiter's queue entry: a crashed waiter is skipped after at most this long. */
        public Builder entryTtl(Duration entryTtl) {
            this.entryTtl = entryTtl;
            return this;
        }

        /**
         * Opt-in reentrancy for a mutex ({@link LockgateClient#getLock(String, LockOptions)}) or
         * both halves of a read-write lock: acquiring again through the <em>same handle object</em>
         * while it holds the lock succeeds at once with the same fencing token and adds a hold;
         * only releasing the last hold frees it. The owner is the handle, never the thread: two
         * threads sharing one reentrant handle share its holds. Semaphores and elections reject
         * it ({@link LockInvalidArgumentException}).
         */
        public Builder reentrant(Boolean reentrant) {
            this.reentrant = reentrant;
            return this;
        }

        public LockOptions build() {
            return new LockOptions(this);
        }
    }
}
