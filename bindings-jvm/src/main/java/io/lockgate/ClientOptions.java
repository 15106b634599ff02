package io.lockgate;

import io.lockgate.internal.ffi.NativeClientOptions;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * How a {@link LockgateClient} connects. Immutable; unset fields take the core's defaults
 * (key prefix {@code "lockgate:"}, 5 s connect and response timeouts, the system's TLS roots,
 * a single server without replica acknowledgements).
 *
 * <p>Deployment modes beyond one server:
 * <pre>{@code
 * // A Redis Cluster: the URL is any one node; every lock's keys share a slot.
 * ClientOptions.builder().cluster(true).build();
 * // A primary with replicas: a grant counts only once WAIT confirms it on 1 replica within 200 ms.
 * ClientOptions.builder().replicaAcks(1, Duration.ofMillis(200)).build();
 * }</pre>
 */
public final class ClientOptions {
    private static final ClientOptions DEFAULTS = new Builder().build();

    private final String keyPrefix;
    private final byte[] tlsCaPem;
    private final Duration connectTimeout;
    private final Duration responseTimeout;
    private final boolean cluster;
    private final Integer replicaAcks;
    private final Duration replicaAckTimeout;

    private ClientOptions(Builder b) {
        this.keyPrefix = b.keyPrefix;
        this.tlsCaPem = b.tlsCaPem == null ? null : b.tlsCaPem.clone();
        this.connectTimeout = b.connectTimeout;
        this.responseTimeout = b.responseTimeout;
        this.cluster = b.cluster;
        this.replicaAcks = b.replicaAcks;
        this.replicaAckTimeout = b.replicaAckTimeout;
    }

    public static ClientOptions defaults() {
        return DEFAULTS;
    }

    public static Builder builder() {
        return new Builder();
    }

    NativeClientOptions toNative() {
        return new NativeClientOptions(
            keyPrefix,
            tlsCaPem == null ? null : tlsCaPem.clone(),
            Futures.secsOrNull(connectTimeout),
            Futures.secsOrNull(responseTimeout),
            cluster,
            replicaAcks == null ? null : replicaAcks.longValue(),
            Futures.secsOrNull(replicaAckTimeout));
    }

    @Override
    public String toString() {
        return "ClientOptions{keyPrefix=" + (keyPrefix == null ? "default" : "'" + keyPrefix + "'")
            + ", tlsCaPem=" + (tlsCaPem == null ? "system roots" : tlsCaPem.length + " bytes")
            + ", connectTimeout=" + (connectTimeout == null ? "default" : connectTimeout)
            + ", responseTimeout=" + (responseTimeout == null ? "default" : responseTimeout)
            + ", cluster=" + cluster
            + ", replicaAcks=" + (replicaAcks == null ? "off"
                : replicaAcks + " within " + (replicaAckTimeout == null ? "default" : replicaAckTimeout))
            + "}";
    }

    /** Builds {@link ClientOptions}; {@code null} means "the core's default". */
    public static final class Builder {
        private String keyPrefix;
        private byte[] tlsCaPem;
        private Duration connectTimeout;
        private Duration responseTimeout;
        private boolean cluster;
        private Integer replicaAcks;
        private Duration replicaAckTimeout;

        private Builder() {}

        /** Prepended to every key and channel; clients that share locks must use the same prefix. */
        public Builder keyPrefix(String keyPrefix) {
            this.keyPrefix = keyPrefix;
            return this;
        }

        /** PEM root certificate(s) to trust for {@code rediss://} instead of the system store. */
        public Builder tlsCaPem(byte[] pem) {
            this.tlsCaPem = pem == null ? null : pem.clone();
            return this;
        }

        /** PEM root certificate(s) as text. */
        public Builder tlsCaPem(String pem) {
            return tlsCaPem(pem == null ? null : pem.getBytes(StandardCharsets.UTF_8));
        }

        /** Limit on establishing a connection. */
        public Builder connectTimeout(Duration connectTimeout) {
            this.connectTimeout = connectTimeout;
            return this;
        }

        /** Limit on one server round trip before it counts as a connection failure. */
        public Builder responseTimeout(Duration responseTimeout) {
            this.responseTimeout = responseTimeout;
            return this;
        }

        /**
         * Treat the URL as one seed node of a Redis Cluster (default {@code false}): the client
         * discovers the other nodes, sends each lock's scripts to the primary that owns its slot
         * (all keys of one lock share a hash tag) and follows {@code MOVED}/{@code ASK}
         * redirections. Every primitive works unchanged. Cannot be combined with
         * {@link #replicaAcks(int, Duration)}.
         */
        public Builder cluster(boolean cluster) {
            this.cluster = cluster;
            return this;
        }

        /**
         * Replica-acknowledged mode for a primary with replicas (PROTOCOL.md §4): every grant,
         * extend and renewal is followed by {@code WAIT replicas timeout} and counts only if at
         * least {@code replicas} replicas acknowledged it. An unconfirmed grant is undone and the
         * acquisition fails with {@link LockConnectionException} (retryable; a waiting
         * {@code acquire} keeps trying until its timeout). {@code WAIT} blocks the client's
         * connection for up to {@code timeout}, which must be at least 1 ms and below the
         * {@linkplain #responseTimeout(Duration) response timeout}; {@code null} takes 1 s.
         * Invalid values ({@code replicas < 1}, a bad timeout, combined with
         * {@link #cluster(boolean)}) make {@link LockgateClient#connect(String, ClientOptions)}
         * throw {@link LockInvalidArgumentException}. This narrows, but cannot close, the window
         * in which a failover loses a grant: replication stays asynchronous.
         */
        public Builder replicaAcks(int replicas, Duration timeout) {
            this.replicaAcks = replicas;
            this.replicaAckTimeout = timeout;
            return this;
        }

        public ClientOptions build() {
            return new ClientOptions(this);
        }
    }
}
