package io.lockgate;

import io.lockgate.internal.ffi.NativeLockOptions;
import java.time.Duration;

/**
 * How a lock behaves once acquired and while waiting. Immutable; a {@code null} component takes
 * the core's default for the client's backend (a renewed 30 s lease, or a Redlock's
 * {@code maxLease} if shorter; no wait limit). Values are validated by the core when the lock is
 * made, and a bad one is a {@link LockInvalidArgumentException}.
 *
 * <pre>{@code
 * LockOptions.fixedLease(Duration.ofSeconds(10));            // frees itself 10 s after acquiring
 * LockOptions.builder().lease(Duration.ofSeconds(5)).waitTimeout(Duration.ofSeconds(2)).build();
 * }</pre>
 *
 * @param lease the lease on the server (at least 10 ms, at most 30 days)
 * @param autoRenew whether a watchdog keeps the lease alive until release (Redisson's behaviour)
 * @param waitTimeout the wait of {@code lock()} / {@code acquire()} / {@code campaign(value)}
 *     ({@code null}: until acquired)
 * @param entryTtl the lease of a waiter's queue entry: a crashed waiter is skipped after at most
 *     this long (backends with a queue only)
 * @param reentrant opt-in reentrancy, see {@link Builder#reentrant(Boolean)}
 * @param minHold the shortest hold (ShedLock's {@code lockAtLeastFor}): a release sooner than
 *     this after the grant leaves the lock held on the server until then, even once this process
 *     is gone; a {@link LockUnsupportedException} where the backend cannot (ZooKeeper, etcd:
 *     capability {@code minHold})
 * @param maxHold the longest hold (ShedLock's {@code lockAtMostFor}): the lease is not renewed
 *     past this long after the grant and is lost then (loss reason {@code max_hold})
 */
public record LockOptions(Duration lease, Boolean autoRenew, Duration waitTimeout, Duration entryTtl,
                          Boolean reentrant, Duration minHold, Duration maxHold) {
    private static final LockOptions DEFAULTS = new LockOptions(null, null, null, null, null, null, null);

    /**
     * The options without a shortest or longest hold (the record's components before those).
     *
     * @param lease the lease on the server ({@code null}: the default)
     * @param autoRenew whether a watchdog keeps the lease alive until release ({@code null}: yes)
     * @param waitTimeout the default wait ({@code null}: until acquired)
     * @param entryTtl the lease of a waiter's queue entry ({@code null}: the default)
     * @param reentrant opt-in reentrancy ({@code null}: off)
     */
    public LockOptions(Duration lease, Boolean autoRenew, Duration waitTimeout, Duration entryTtl, Boolean reentrant) {
        this(lease, autoRenew, waitTimeout, entryTtl, reentrant, null, null);
    }

    /**
     * Nothing set: the core's defaults.
     *
     * @return options with nothing set
     */
    public static LockOptions defaults() {
        return DEFAULTS;
    }

    /**
     * A lease that is not renewed: the lock frees itself {@code lease} after acquisition.
     *
     * @param lease how long the lock stays held after acquisition unless released first
     * @return options with that lease and no renewal
     */
    public static LockOptions fixedLease(Duration lease) {
        return builder().lease(lease).autoRenew(false).build();
    }

    /**
     * A lease of {@code lease} that the watchdog renews every {@code lease / 3} while held.
     *
     * @param lease the lease on the server, renewed while held
     * @return options with that lease, renewed
     */
    public static LockOptions renewedLease(Duration lease) {
        return builder().lease(lease).autoRenew(true).build();
    }

    /**
     * A builder starting from the defaults (every setting unset: the core's default).
     *
     * @return a builder with nothing set
     */
    public static Builder builder() {
        return new Builder(DEFAULTS);
    }

    /**
     * A builder starting from these options.
     *
     * @return a builder with these options set
     */
    public Builder toBuilder() {
        return new Builder(this);
    }

    boolean isReentrant() {
        return Boolean.TRUE.equals(reentrant);
    }

    NativeLockOptions toNative() {
        return new NativeLockOptions(Futures.secsOrNull(lease), autoRenew, Futures.secsOrNull(waitTimeout),
            Futures.secsOrNull(entryTtl), reentrant, Futures.secsOrNull(minHold), Futures.secsOrNull(maxHold));
    }

    /** Builds {@link LockOptions}; {@code null} means "the core's default". */
    public static final class Builder {
        private Duration lease;
        private Boolean autoRenew;
        private Duration waitTimeout;
        private Duration entryTtl;
        private Boolean reentrant;
        private Duration minHold;
        private Duration maxHold;

        private Builder(LockOptions o) {
            lease = o.lease;
            autoRenew = o.autoRenew;
            waitTimeout = o.waitTimeout;
            entryTtl = o.entryTtl;
            reentrant = o.reentrant;
            minHold = o.minHold;
            maxHold = o.maxHold;
        }

        /**
         * See {@link LockOptions#minHold()}.
         *
         * @param minHold the shortest hold ({@code null}: none)
         * @return this builder
         */
        public Builder minHold(Duration minHold) {
            this.minHold = minHold;
            return this;
        }

        /**
         * See {@link LockOptions#maxHold()}.
         *
         * @param maxHold the longest hold ({@code null}: none)
         * @return this builder
         */
        public Builder maxHold(Duration maxHold) {
            this.maxHold = maxHold;
            return this;
        }

        /**
         * See {@link LockOptions#lease()}.
         *
         * @param lease the lease on the server ({@code null}: the default)
         * @return this builder
         */
        public Builder lease(Duration lease) {
            this.lease = lease;
            return this;
        }

        /**
         * See {@link LockOptions#autoRenew()}.
         *
         * @param autoRenew whether the lease is renewed until release ({@code null}: the default, yes)
         * @return this builder
         */
        public Builder autoRenew(Boolean autoRenew) {
            this.autoRenew = autoRenew;
            return this;
        }

        /**
         * See {@link LockOptions#waitTimeout()}.
         *
         * @param waitTimeout the default wait ({@code null}: until acquired)
         * @return this builder
         */
        public Builder waitTimeout(Duration waitTimeout) {
            this.waitTimeout = waitTimeout;
            return this;
        }

        /**
         * See {@link LockOptions#entryTtl()}.
         *
         * @param entryTtl the lease of a waiter's queue entry ({@code null}: the default)
         * @return this builder
         */
        public Builder entryTtl(Duration entryTtl) {
            this.entryTtl = entryTtl;
            return this;
        }

        /**
         * Opt-in reentrancy for a mutex or both halves of a read-write lock: acquiring again
         * through the <em>same handle object</em> while it holds the lock succeeds at once with
         * the same fencing token and adds a hold; only releasing the last hold frees it. The
         * {@code Lock} interface re-enters per thread instead. Semaphores and elections reject it.
         *
         * @param reentrant whether acquisitions through one handle object re-enter ({@code null}: no)
         * @return this builder
         */
        public Builder reentrant(Boolean reentrant) {
            this.reentrant = reentrant;
            return this;
        }

        /**
         * The options set so far, as an immutable {@link LockOptions}.
         *
         * @return the options
         */
        public LockOptions build() {
            return new LockOptions(lease, autoRenew, waitTimeout, entryTtl, reentrant, minHold, maxHold);
        }
    }
}
