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
        try {
            Path base = Paths.get(System.getProperty("lockgate.test.tmp", System.getProperty("java.io.tmpdir")));
            Files.createDirectories(base);
            this.dir = Files.createTempDirectory(base, "redis-");
            this.port = freePort();
            List<String> cmd = new ArrayList<>(List.of(
                System.getenv().getOrDefault("LOCKGATE_REDIS_SERVER", "redis-server"),
                "--port", String.valueOf(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir.toString()));
            cmd.addAll(extra);
            this.process = new ProcessBuilder(cmd)
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("redis.log").toFile())
                .start();
        } catch (IOException e) {
            throw new UncheckedIOException("redis-server must be installed (bindings-jvm/ci.sh install)", e);
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            try {
                new Socket("127.0.0.1", port).close();
                break;
            } catch (IOException e) {
                if (System.nanoTime() > deadline || !process.isAlive()) {
                    close();
                    throw new IllegalStateException("redis-server did not start on port " + port);
                }
                sleep(20);
            }
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

    static int freePort() {
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
        try {
            process.waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        } catch (IOException ignored) {
            // best effort
        }
    }
}
