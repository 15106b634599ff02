package io.lockgate;

import io.lockgate.internal.ffi.NativeRedlockOptions;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * Settings of a Redlock deployment for {@link RedlockClient}. Immutable; unset fields take the
 * core's defaults: key prefix {@code "lockgate:"}, {@code maxLease} 30 s, node timeout 50 ms,
 * retry delay 200 ms plus up to 200 ms of jitter, drift allowance 1 % of the lease plus 2 ms,
 * 5 s connect and response timeouts, the system's TLS roots. Values are validated by the core
 * at {@link RedlockClient#connect(java.util.List, RedlockOptions)}; a bad one is a
 * {@link LockInvalidArgumentException}.
 *
 * <p><b>Every client of a deployment must use the same {@link Builder#maxLease(Duration)
 * maxLease}</b>: a master that restarted grants nothing until it has been up for
 * {@code maxLease} + 1 s (it may have forgotten a lease that is still valid on the others), and
 * no lease or extension may be longer. See PROTOCOL.md §8.
 *
 * <pre>{@code
 * RedlockOptions.builder()
 *     .maxLease(Duration.ofSeconds(10))      // the longest lease any client takes
 *     .nodeTimeout(Duration.ofMillis(50))    // per-master answer limit of one attempt
 *     .build();
 * }</pre>
 */
public final class RedlockOptions {
    private static final RedlockOptions DEFAULTS = new Builder().build();

    private final String keyPrefix;
    private final Duration maxLease;
    private final Duration nodeTimeout;
    private final Duration retryDelay;
    private final Duration retryJitter;
    private final Double driftFactor;
    private final Duration driftFixed;
    private final byte[] tlsCaPem;
    private final Duration connectTimeout;
    private final Duration responseTimeout;

    private RedlockOptions(Builder b) {
        this.keyPrefix = b.keyPrefix;
        this.maxLease = b.maxLease;
        this.nodeTimeout = b.nodeTimeout;
        this.retryDelay = b.retryDelay;
        this.retryJitter = b.retryJitter;
        this.driftFactor = b.driftFactor;
        this.driftFixed = b.driftFixed;
        this.tlsCaPem = b.tlsCaPem == null ? null : b.tlsCaPem.clone();
        this.connectTimeout = b.connectTimeout;
        this.responseTimeout = b.responseTimeout;
    }

    /** The core's defaults (a 30 s {@code maxLease}). */
    public static RedlockOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder();
    }

    NativeRedlockOptions toNative() {
        return new NativeRedlockOptions(
            keyPrefix,
            Futures.secsOrNull(maxLease),
            Futures.secsOrNull(nodeTimeout),
            Futures.secsOrNull(retryDelay),
            Futures.secsOrNull(retryJitter),
            driftFactor,
            Futures.secsOrNull(driftFixed),
            tlsCaPem == null ? null : tlsCaPem.clone(),
            Futures.secsOrNull(connectTimeout),
            Futures.secsOrNull(responseTimeout));
    }

    private static String or(Object v) {
        return v == null ? "default" : v.toString();
    }

    @Override
    public String toString() {
        return "RedlockOptions{keyPrefix=" + (keyPrefix == null ? "default" : "'" + keyPrefix + "'")
            + ", maxLease=" + or(maxLease) + ", nodeTimeout=" + or(nodeTimeout)
            + ", retryDelay=" + or(retryDelay) + ", retryJitter=" + or(retryJitter)
            + ", driftFactor=" + or(driftFactor) + ", driftFixed=" + or(driftFixed)
            + ", tlsCaPem=" + (tlsCaPem == null ? "system roots" : tlsCaPem.length + " bytes")
            + ", connectTimeout=" + or(connectTimeout) + ", responseTimeout=" + or(responseTimeout) + "}";
    }

    /** Builds {@link RedlockOptions}; {@code null} means "the core's default". */
    public static final class Builder {
        private String keyPrefix;
        private Duration maxLease;
        private Duration nodeTimeout;
        private Duration retryDelay;
        private Duration retryJitter;
        private Double driftFactor;
        private Duration driftFixed;
        private byte[] tlsCaPem;
        private Duration connectTimeout;
        private Duration responseTimeout;

        private Builder() {}

        /** Prepended to every key; clients that share locks must use the same prefix. */
        public Builder keyPrefix(String keyPrefix) {
            this.keyPrefix = keyPrefix;
            return this;
        }

        /**
         * The longest lease any client of the deployment takes (10 ms to 30 days, default 30 s);
         * the same for every client. Longer leases and extensions are rejected, and a master
         * grants nothing until it has been up this long plus 1 s (the delayed-restart rule), so
         * a freshly started deployment is also delayed by it.
         */
        public Builder maxLease(Duration maxLease) {
            this.maxLease = maxLease;
            return this;
        }

        /**
         * How long one attempt waits for the masters' answers before counting the silent ones as
         * failed (at least 1 ms, default 50 ms; keep it small next to the lease).
         */
        public Builder nodeTimeout(Duration nodeTimeout) {
            this.nodeTimeout = nodeTimeout;
            return this;
        }

        /** Pause before another attempt after a failed one (at least 1 ms, default 200 ms)... */
        public Builder retryDelay(Duration retryDelay) {
            this.retryDelay = retryDelay;
            return this;
        }

        /** ... plus a random part up to this (default 200 ms), so contenders do not retry in step. */
        public Builder retryJitter(Duration retryJitter) {
            this.retryJitter = retryJitter;
            return this;
        }

        /**
         * Clock-rate drift allowed between this client and the masters, as a fraction of the
         * lease (at least 0, below 0.5, default 0.01): a grant is valid for
         * {@code lease - elapsed - lease * driftFactor - driftFixed}.
         */
        public Builder driftFactor(Double driftFactor) {
            this.driftFactor = driftFactor;
            return this;
        }

        /** The fixed part of the drift allowance (at most 10 s, default 2 ms). */
        public Builder driftFixed(Duration driftFixed) {
            this.driftFixed = driftFixed;
            return this;
        }

        /** PEM root certificate(s) to trust for {@code rediss://} masters instead of the system store. */
        public Builder tlsCaPem(byte[] pem) {
            this.tlsCaPem = pem == null ? null : pem.clone();
            return this;
        }

        /** PEM root certificate(s) as text. */
        public Builder tlsCaPem(String pem) {
            return tlsCaPem(pem == null ? null : pem.getBytes(StandardCharsets.UTF_8));
        }

        /** Limit on establishing a connection to one master. */
        public Builder connectTimeout(Duration connectTimeout) {
            this.connectTimeout = connectTimeout;
            return this;
        }

        /**
         * Limit on one round trip to one master before it counts as a connection failure (the
         * node timeout decides an attempt much sooner).
         */
        public Builder responseTimeout(Duration responseTimeout) {
            this.responseTimeout = responseTimeout;
            return this;
        }

        public RedlockOptions build() {
            return new RedlockOptions(this);
        }
    }
}
