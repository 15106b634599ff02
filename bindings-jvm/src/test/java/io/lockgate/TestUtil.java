package io.lockgate;

import java.util.function.BooleanSupplier;

final class TestUtil {
    private TestUtil() {}

    /** Polls {@code cond} every 5 ms until it holds or {@code timeoutMs} passed; returns the last value. */
    static boolean eventually(long timeoutMs, BooleanSupplier cond) {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (true) {
            if (cond.getAsBoolean()) {
                return true;
            }
            if (System.nanoTime() > deadline) {
                return false;
            }
            RedisServer.sleep(5);
        }
    }

    /** The server key of lock {@code name} under the default prefix; {@code suffix} e.g. ":queue". */
    static String key(String name, String suffix) {
        return "lockgate:{" + name + "}" + suffix;
    }
}
