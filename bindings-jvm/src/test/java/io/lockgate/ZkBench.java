package io.lockgate;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;

/**
 * Issue 15's JVM benchmark: lockgate's Java binding against Curator's {@code InterProcessMutex}
 * on one real ZooKeeper server from the project's launcher, in one run ({@link PeerBench}: 4
 * and 16 workers; requests are the server's own {@code srvr} "Received" count, pings included).
 * One client (one ZooKeeper session) per worker for both libraries.
 *
 * <p>Args: OUT_MD COMMAND [PAIRS] [ROUNDS] [SECONDS] [ONLY] (ONLY: {@code lockgate} or {@code curator}, to
 * measure one library alone while developing; the table then has no comparison).
 */
public final class ZkBench {
    private ZkBench() {}

    /** Curator with its defaults: {@code InterProcessMutex.acquire()} / {@code release()}. */
    static final class CuratorLocker implements PeerBench.Locker {
        private final CuratorFramework curator;
        private final InterProcessMutex mutex;

        CuratorLocker(ZooKeeperServer zk, String path) {
            curator = zk.curator();
            mutex = new InterProcessMutex(curator, path);
        }

        @Override
        public void lock() throws Exception {
            if (!mutex.acquire(PeerBench.WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("Curator acquire timed out");
            }
        }

        @Override
        public void unlock() throws Exception {
            mutex.release();
        }

        @Override
        public void close() {
            curator.close();
        }
    }

    public static void main(String[] args) throws Exception {
        String command = args[1];
        int pairs = args.length > 2 ? Integer.parseInt(args[2]) : 1000;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 3;
        double seconds = args.length > 4 ? Double.parseDouble(args[4]) : 3.0;
        String only = args.length > 5 ? args[5] : "";
        try (ZooKeeperServer zk = ZooKeeperServer.start()) {
            String member = zk.connectString().split(",")[0];
            Map<String, PeerBench.Factory> libs = new LinkedHashMap<>();
            if (!only.equals("curator")) {
                libs.put("lockgate", path -> new PeerBench.LockgateLocker(zk.url(), path));
            }
            if (!only.equals("lockgate")) {
                libs.put("Curator `InterProcessMutex`", path -> new CuratorLocker(zk, path));
            }
            String setup = String.format(Locale.ROOT, "Command: `%s` (runs `io.lockgate.ZkBench`).%n%n"
                    + "Setup: one ZooKeeper %s server on loopback from the project's launcher "
                    + "(`test-servers zookeeper`), Java %s, %d cores (shared), Curator %s with its defaults "
                    + "(`ExponentialBackoffRetry`, 60 s session); lockgate's default lock (its default session timeout). "
                    + "One client (one ZooKeeper session) per worker for both.",
                command, version(fourLetter(member, "srvr")), System.getProperty("java.version"),
                Runtime.getRuntime().availableProcessors(), PeerBench.jarVersion("curator-recipes"));
            String remark = "Both libraries send the same ZooKeeper requests (the requests columns), so a gap between them is "
                + "not on the wire: it is each client's own cost per pair (for lockgate, the Java binding's, measured against "
                + "the native core on Redis in the JVM section, plus the core's ZooKeeper client path).";
            PeerBench.Spec spec = new PeerBench.Spec("JVM binding on ZooKeeper: lockgate vs Curator `InterProcessMutex`", setup,
                "ZooKeeper requests", "`srvr`'s Received count, pings included", () -> received(member), "/bench/",
                new int[] {4, 16}, remark);
            PeerBench.run(spec, libs, pairs, rounds, seconds, Paths.get(args[0]));
        }
        System.exit(0);
    }

    /** The server's version from its {@code srvr} answer. */
    static String version(String srvr) {
        for (String l : srvr.split("\n")) {
            if (l.startsWith("Zookeeper version:")) {
                return l.substring("Zookeeper version:".length()).trim().split("[-,]")[0];
            }
        }
        return "?";
    }

    /** The server's count of requests received ({@code srvr} "Received:"), or -1 if it does not answer 4lw. */
    static long received(String member) {
        for (String line : fourLetter(member, "srvr").split("\n")) {
            if (line.startsWith("Received:")) {
                return Long.parseLong(line.substring("Received:".length()).trim());
            }
        }
        return -1;
    }

    /** A ZooKeeper four-letter-word command's reply (empty if refused). */
    static String fourLetter(String member, String cmd) {
        int colon = member.lastIndexOf(':');
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(member.substring(0, colon), Integer.parseInt(member.substring(colon + 1))), 5000);
            s.setSoTimeout(5000);
            OutputStream o = s.getOutputStream();
            o.write(cmd.getBytes(StandardCharsets.US_ASCII));
            o.flush();
            InputStream in = s.getInputStream();
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "";
        }
    }

}
