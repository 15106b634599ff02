package io.lockgate;

import io.lockgate.internal.ffi.NativeClientOptions;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * How a {@link LockgateClient} connects. Immutable; unset fields take the core's defaults
 * (key prefix {@code "lockgate:"}, 5 s connect and response timeouts, the system's TLS roots).
 */
public final class ClientOptions {
    private static final ClientOptions DEFAULTS = new Builder().build();

    private final String keyPrefix;
    private final byte[] tlsCaPem;
    private final Duration connectTimeout;
    private final Duration responseTimeout;

    private ClientOptions(Builder b) {
        this.keyPrefix = b.keyPrefix;
        this.tlsCaPem = b.tlsCaPem == null ? null : b.tlsCaPem.clone();
        this.connectTimeout = b.connectTimeout;
        this.responseTimeout = b.responseTimeout;
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
            connectTimeout == null ? null : Futures.secs(connectTimeout),
            responseTimeout == null ? null : Futures.secs(responseTimeout));
    }

    @Override
    public String toString() {
        return "ClientOptions{keyPrefix=" + (keyPrefix == null ? "default" : "'" + keyPrefix + "'")
            + ", tlsCaPem=" + (tlsCaPem == null ? "system roots" : tlsCaPem.length + " bytes")
            + ", connectTimeout=" + (connectTimeout == null ? "default" : connectTimeout)
            + ", responseTimeout=" + (responseTimeout == null ? "default" : responseTimeout) + "}";
    }

    /** Builds {@link ClientOptions}; {@code null} means "the core's default". */
    public static final class Builder {
        private String keyPrefix;
        private byte[] tlsCaPem;
        private Duration connectTimeout;
        private Duration responseTimeout;

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

        public ClientOptions build() {
            return new ClientOptions(this);
        }
    }
}
