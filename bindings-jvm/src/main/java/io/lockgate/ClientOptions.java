package io.lockgate;

import io.lockgate.internal.ffi.NativeOptionValue;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * How a {@link LockgateClient} connects, for every backend: options by name, each handed to the
 * core as given; the core checks names, types and ranges and applies its defaults, with
 * messages in these names. A backend's own options are {@link Builder#set(String, Object)}.
 *
 * <pre>{@code
 * ClientOptions.builder().keyPrefix("app:").connectTimeout(Duration.ofSeconds(2)).build();
 * // A primary with replicas: a grant counts only once WAIT confirms it on 1 replica within 200 ms.
 * ClientOptions.builder().replicaAcks(1, Duration.ofMillis(200)).build();
 * // A Redlock deployment ("redlock://m1:6379,m2:6379,m3:6379"): its longest lease.
 * ClientOptions.builder().set("maxLease", Duration.ofSeconds(10)).build();
 * }</pre>
 *
 * <p>Names (an unknown one is a {@link LockInvalidArgumentException} listing them all):
 * {@code keyPrefix}, {@code tlsCaPem}, {@code connectTimeout}, {@code responseTimeout},
 * {@code replicaAcks}, {@code replicaAckTimeout}, {@code label}; Redlock and memcached: {@code maxLease}; Redlock: {@code nodeTimeout},
 * {@code retryDelay}, {@code retryJitter}, {@code driftFactor}, {@code driftFixed}.
 */
public final class ClientOptions {
    private static final ClientOptions DEFAULTS = new Builder().build();

    private final Map<String, Object> values;

    private ClientOptions(Map<String, Object> values) {
        this.values = Collections.unmodifiableMap(new LinkedHashMap<>(values));
    }

    /**
     * No option set: the core's defaults.
     *
     * @return options with nothing set
     */
    public static ClientOptions defaults() {
        return DEFAULTS;
    }

    /**
     * A builder starting from the core's defaults (every setting unset).
     *
     * @return a builder with nothing set
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * The options as set, by name (byte arrays are copies).
     *
     * @return each option set, by its name
     */
    public Map<String, Object> values() {
        return values;
    }

    /** The options as the native layer takes them: each value typed, durations in seconds. */
    Map<String, NativeOptionValue> toNative() {
        Map<String, NativeOptionValue> out = new LinkedHashMap<>();
        values.forEach((k, v) -> out.put(k, nativeValue(k, v)));
        return out;
    }

    private static NativeOptionValue nativeValue(String name, Object v) {
        if (v == null) {
            return NativeOptionValue.Unset.INSTANCE;
        } else if (v instanceof Boolean b) {
            return new NativeOptionValue.Flag(b);
        } else if (v instanceof Integer || v instanceof Long || v instanceof Short) {
            return new NativeOptionValue.Whole(((Number) v).longValue());
        } else if (v instanceof Number n) {
            return new NativeOptionValue.Real(n.doubleValue());
        } else if (v instanceof Duration d) {
            return new NativeOptionValue.Real(Futures.secs(d));
        } else if (v instanceof String s) {
            return new NativeOptionValue.Text(s);
        } else if (v instanceof byte[] b) {
            return new NativeOptionValue.Bytes(b.clone());
        }
        throw new LockInvalidArgumentException(name + " must be a Boolean, a number, a Duration, a String or bytes, got "
            + v.getClass().getSimpleName(), false);
    }

    /** Each option set, {@code null} as {@code default} and bytes by their length. */
    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("ClientOptions{");
        values.forEach((k, v) -> b.append(b.length() > 14 ? ", " : "").append(k).append('=')
            .append(v == null ? "default" : v instanceof byte[] a ? a.length + " bytes" : v));
        return b.append('}').toString();
    }

    /** Builds {@link ClientOptions}; an option not set (or set to {@code null}) takes the core's default. */
    public static final class Builder {
        private final Map<String, Object> values = new LinkedHashMap<>();

        private Builder() {}

        /**
         * Sets option {@code name} to a Boolean, integer, Duration, number, String or byte[]; {@code null}: default.
         *
         * @param name the option's name (checked by the core at connect: an unknown one is a {@link LockInvalidArgumentException})
         * @param value its value, or {@code null} for the default
         * @return this builder
         */
        public Builder set(String name, Object value) {
            values.put(java.util.Objects.requireNonNull(name, "name"), value instanceof byte[] b ? b.clone() : value);
            return this;
        }

        /**
         * Prepended to every key and channel; clients that share locks must use the same prefix.
         *
         * @param keyPrefix the prefix (default {@code lockgate:})
         * @return this builder
         */
        public Builder keyPrefix(String keyPrefix) {
            return set("keyPrefix", keyPrefix);
        }

        /**
         * PEM root certificate(s) to trust for {@code rediss://} instead of the system store.
         *
         * @param pem the PEM bytes (copied)
         * @return this builder
         */
        public Builder tlsCaPem(byte[] pem) {
            return set("tlsCaPem", pem);
        }

        /**
         * PEM root certificate(s) as text.
         *
         * @param pem the PEM text
         * @return this builder
         */
        public Builder tlsCaPem(String pem) {
            return set("tlsCaPem", pem);
        }

        /**
         * Limit on connecting: the whole connect, every attempt included, and each reconnect.
         *
         * @param connectTimeout the limit ({@code null}: the default)
         * @return this builder
         */
        public Builder connectTimeout(Duration connectTimeout) {
            return set("connectTimeout", connectTimeout);
        }

        /**
         * Limit on one server round trip; a connection silent this long is replaced.
         *
         * @param responseTimeout the limit ({@code null}: the default)
         * @return this builder
         */
        public Builder responseTimeout(Duration responseTimeout) {
            return set("responseTimeout", responseTimeout);
        }

        /**
         * Grants, extends and renewals count once {@code WAIT} confirms them on {@code replicas}
         * replicas within {@code timeout} ({@code null}: the core's default), else a retryable
         * {@link LockConnectionException} (PROTOCOL.md §4).
         *
         * @param replicas how many replicas must confirm (at least 1)
         * @param timeout how long {@code WAIT} may block ({@code null}: the default)
         * @return this builder
         */
        public Builder replicaAcks(int replicas, Duration timeout) {
            return set("replicaAcks", replicas).set("replicaAckTimeout", timeout);
        }

        /**
         * Who this client is, stored with every lock entry it creates for an operator to read
         * (default {@code <hostname>:<pid>}; at most 256 bytes of UTF-8, no control characters,
         * never a credential). PROTOCOL.md says where each backend keeps it.
         *
         * @param label the label ({@code null}: {@code <hostname>:<pid>})
         * @return this builder
         */
        public Builder label(String label) {
            return set("label", label);
        }

        /**
         * The options set so far, as an immutable {@link ClientOptions}.
         *
         * @return the options
         */
        public ClientOptions build() {
            return new ClientOptions(values);
        }
    }
}
