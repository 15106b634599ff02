package io.lockgate;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
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
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
    }

    /** A loopback port nothing listens on now (for connections that must fail). */
    static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The server key of lock {@code name} under the default prefix; {@code suffix} e.g. ":queue". */
    static String key(String name, String suffix) {
        return "lockgate:{" + name + "}" + suffix;
    }

    /** Keys of {@code name} (every primitive) other than the fence counters, which are kept on purpose. */
    static List<String> liveKeys(Resp raw, String name) {
        List<String> live = new ArrayList<>();
        for (Object k : (List<?>) raw.call("KEYS", "lockgate:{" + name + "}*")) {
            if (!String.valueOf(k).endsWith(":fence")) {
                live.add(String.valueOf(k));
            }
        }
        return live;
    }

    /** Waits until the sorted set {@code key} has at least {@code n} members. */
    static boolean zcardAtLeast(Resp raw, String key, long n, long timeoutMs) {
        return eventually(timeoutMs, () -> raw.num("ZCARD", key) >= n);
    }
}
