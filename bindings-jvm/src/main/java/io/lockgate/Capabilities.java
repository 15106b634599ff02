package io.lockgate;

import io.lockgate.internal.ffi.NativeCapabilities;
import io.lockgate.internal.ffi.NativeCapability;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * What a client's backend can do, by the core's names in Java spelling ({@code fencing},
 * {@code fifo}, {@code semaphore}, {@code readWrite}, {@code election}, {@code observe},
 * {@code reentrant}, {@code replicaAcks}, and whatever a later backend adds). A handle needing a
 * missing one fails with {@link LockUnsupportedException}.
 *
 * @param backend the backend's name ({@code "Redis"}, {@code "Redis Cluster"}, {@code "Redlock"})
 * @param scheme the URL scheme the client was made with ({@code "redis"}, {@code "rediss+redlock"}, ...)
 * @param all every capability by its Java name, in the core's order
 */
public record Capabilities(String backend, String scheme, Map<String, Boolean> all) {
    static Capabilities of(NativeCapabilities c) {
        Map<String, Boolean> all = new LinkedHashMap<>();
        for (NativeCapability p : c.getPairs()) {
            all.put(camelCase(p.getName()), p.getSupported());
        }
        return new Capabilities(c.getBackend(), c.getScheme(), Collections.unmodifiableMap(all));
    }

    /** The core's snake_case name in Java's spelling ({@code read_write} → {@code readWrite}). */
    private static String camelCase(String snake) {
        return Pattern.compile("_(.)").matcher(snake).replaceAll(m -> m.group(1).toUpperCase(Locale.ROOT));
    }

    /**
     * Whether the backend offers {@code name} (as in {@link #all()}; an unknown name is not offered).
     *
     * @param name a capability's name, as in {@link #all()} ({@code semaphore}, {@code fencing}, ...)
     * @return whether the backend offers it
     */
    public boolean has(String name) {
        return Boolean.TRUE.equals(all.get(name));
    }
}
