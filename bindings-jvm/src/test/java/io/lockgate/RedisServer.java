package io.lockgate;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * A real redis-server owned by a test: free loopback port, {@code --save "" --appendonly no},
 * data in a temp dir, stopped by killing its own process (by pid). No mocks.
 */
final class RedisServer implements AutoCloseable {
    final int port;
    private final Path dir;
    private final Process process;

    private RedisServer(List<String> extra) {
        Path base = Paths.get(System.getProperty("lockgate.test.tmp", System.getProperty("java.io.tmpdir")));
        try {
            Files.createDirectories(base);
            this.dir = Files.createTempDirectory(base, "redis-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        // A server that exits at once lost its port to another probe between freePort() and its
        // own bind: start it again on a new port.
        List<String> failures = new ArrayList<>();
        for (int attempt = 0; attempt < 5; attempt++) {
            int candidate = freePort();
            Process p = tryStart(candidate, extra, failures);
            if (p != null) {
                this.port = candidate;
                this.process = p;
                return;
            }
        }
        deleteDir(dir);
        throw new IllegalStateException("redis-server did not start: " + String.join("; ", failures));
    }

    /** One start on {@code port}: the process once the port accepts connections, else null. */
    private Process tryStart(int port, List<String> extra, List<String> failures) {
        Path log = dir.resolve("redis.log");
        List<String> cmd = new ArrayList<>(List.of(
            System.getenv().getOrDefault("LOCKGATE_REDIS_SERVER", "redis-server"),
            "--port", String.valueOf(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir.toString()));
        cmd.addAll(extra);
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        } catch (IOException e) {
            throw new UncheckedIOException("redis-server must be installed (bindings-jvm/ci.sh install)", e);
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            try {
                new Socket("127.0.0.1", port).close();
                return p;
            } catch (IOException e) {
                if (System.nanoTime() > deadline || !p.isAlive()) {
                    p.destroyForcibly();
                    waitFor(p);
                    failures.add("port " + port + ": " + lastLines(log));
                    return null;
                }
                sleep(20);
            }
        }
    }

    private static String lastLines(Path log) {
        try {
            List<String> lines = Files.readAllLines(log);
            return String.join(" | ", lines.subList(Math.max(0, lines.size() - 3), lines.size()));
        } catch (IOException e) {
            return "no log";
        }
    }

    static RedisServer start() {
        return new RedisServer(List.of());
    }

    /** A server with extra command-line arguments (e.g. {@code --replicaof}, cluster mode). */
    static RedisServer startWith(String... extra) {
        return new RedisServer(List.of(extra));
    }

    /** The server's process id (to pause it with SIGSTOP in tests). */
    long pid() {
        return process.pid();
    }

    /** Sends {@code signal} (e.g. {@code "STOP"}, {@code "CONT"}) to this server's own pid. */
    void signal(String signal) {
        try {
            Process kill = new ProcessBuilder("kill", "-" + signal, String.valueOf(pid())).inheritIO().start();
            if (kill.waitFor() != 0) {
                throw new IllegalStateException("kill -" + signal + " " + pid() + " failed");
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** A server whose users come from an ACL file with {@code lines}. */
    static RedisServer startWithAcl(String... lines) {
        try {
            Path f = Files.createTempFile("lockgate-acl-", ".acl");
            Files.writeString(f, String.join("\n", lines) + "\n");
            f.toFile().deleteOnExit();
            return new RedisServer(List.of("--aclfile", f.toString()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    String url() {
        return "redis://127.0.0.1:" + port;
    }

    Resp raw() {
        return new Resp(port);
    }

    /**
     * A loopback port nothing listens on now, chosen below the kernel's ephemeral range. Why not
     * {@code new ServerSocket(0)}: that hands out ephemeral ports, which client sockets also take
     * as their local ports, so one can take the port before redis-server binds it. Below the
     * range only explicit binds take ports; the constructor retries the remaining race.
     */
    static int freePort() {
        int firstEphemeral = 0;
        try {
            firstEphemeral = Integer.parseInt(
                Files.readString(Paths.get("/proc/sys/net/ipv4/ip_local_port_range")).trim().split("\\s+")[0]);
        } catch (IOException | RuntimeException ignored) {
            // no such file: fall back to an ephemeral port below
        }
        java.util.concurrent.ThreadLocalRandom random = java.util.concurrent.ThreadLocalRandom.current();
        for (int i = 0; i < 200 && firstEphemeral > 10000; i++) {
            int port = random.nextInt(10000, firstEphemeral);
            try (ServerSocket s = new ServerSocket(port, 1, java.net.InetAddress.getLoopbackAddress())) {
                return port;
            } catch (IOException taken) {
                // try another
            }
        }
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        process.destroyForcibly();
        waitFor(process);
        deleteDir(dir);
    }

    private static void waitFor(Process p) {
        try {
            p.waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void deleteDir(Path dir) {
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        } catch (IOException ignored) {
            // best effort
        }
    }
}
