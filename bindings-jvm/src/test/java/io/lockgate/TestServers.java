package io.lockgate;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The real redis-servers of one run of the project's test-server launcher
 * ({@code target/release/test-servers <kind> [...]}, conformance/README.md): it picks free
 * loopback ports, waits until the servers are ready and prints one JSON line; stopping,
 * restarting and pausing a server are commands on its stdin; closing its stdin stops exactly the
 * servers it started, by pid. This class only speaks those lines. No mocks.
 */
final class TestServers implements AutoCloseable {
    /** The launcher's description: {@code url}, {@code pids}, {@code nodes} and the kind's extras. */
    final Map<String, Object> info;
    /** One entry per server, in the launcher's node order (commands name them by index). */
    final List<RedisServer> nodes;
    private final Process process;
    private final BufferedReader out;
    private final Writer in;

    private TestServers(String kind, List<String> args) {
        Path launcher = launcher();
        if (!Files.isExecutable(launcher)) {
            throw new IllegalStateException(launcher + " is missing: cargo build --release -p lockgate-conformance"
                + " (bindings-jvm/ci.sh test does)");
        }
        List<String> cmd = new ArrayList<>(List.of(launcher.toString(), kind));
        cmd.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
        String tmp = System.getProperty("lockgate.test.tmp");
        if (tmp != null && System.getenv("LOCKGATE_TMP") == null) {
            try {
                Files.createDirectories(Paths.get(tmp));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            pb.environment().put("LOCKGATE_TMP", tmp);
        }
        try {
            process = pb.start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + launcher, e);
        }
        out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        String line = readLine();
        if (line == null) {
            close();
            throw new IllegalStateException("test-servers " + kind + " did not start (exit status "
                + process.exitValue() + ")");
        }
        info = ConformanceActor.Json.object(line);
        List<RedisServer> ns = new ArrayList<>();
        List<?> described = (List<?>) info.get("nodes");
        for (int i = 0; i < described.size(); i++) {
            Map<?, ?> n = (Map<?, ?>) described.get(i);
            ns.add(new RedisServer(this, i, ((Number) n.get("port")).intValue(), n));
        }
        nodes = Collections.unmodifiableList(ns);
    }

    /** Starts {@code test-servers kind args...} and waits for its description. */
    static TestServers start(String kind, String... args) {
        return new TestServers(kind, List.of(args));
    }

    /**
     * The launcher: {@code $LOCKGATE_TEST_SERVERS}, else {@code release/test-servers} in
     * {@code $CARGO_TARGET_DIR} or the repository's {@code target/} (as the other bindings' tests).
     */
    static Path launcher() {
        String explicit = System.getenv("LOCKGATE_TEST_SERVERS");
        if (explicit != null && !explicit.isEmpty()) {
            return Paths.get(explicit);
        }
        Path root = repoRoot();
        String targetDir = System.getenv("CARGO_TARGET_DIR");
        Path target = targetDir != null && !targetDir.isEmpty() ? root.resolve(targetDir) : root.resolve("target");
        return target.resolve("release").resolve("test-servers");
    }

    /** The repository root: the nearest directory up from here that holds {@code conformance/Cargo.toml}. */
    private static Path repoRoot() {
        Path start = Paths.get(System.getProperty("user.dir")).toAbsolutePath();
        for (Path p = start; p != null; p = p.getParent()) {
            if (Files.exists(p.resolve("conformance").resolve("Cargo.toml"))) {
                return p;
            }
        }
        throw new IllegalStateException("no repository root above " + start + ": set LOCKGATE_TEST_SERVERS");
    }

    /** The deployment's URL ({@code redis://}, {@code redis+cluster://}, {@code redlock://}, ...). */
    String url() {
        return (String) info.get("url");
    }

    /**
     * Sends one launcher command ({@code stop I}, {@code restart I}, {@code pause I},
     * {@code resume I}, ...) and returns its reply, which must be {@code ok}.
     */
    synchronized Map<String, Object> command(String line) {
        String reply;
        try {
            in.write(line + "\n");
            in.flush();
            reply = readLine();
        } catch (IOException e) {
            throw new UncheckedIOException("test-servers: " + line, e);
        }
        if (reply == null) {
            throw new IllegalStateException("test-servers ended without answering " + line);
        }
        Map<String, Object> r = ConformanceActor.Json.object(reply);
        if (!Boolean.TRUE.equals(r.get("ok"))) {
            throw new IllegalStateException("test-servers " + line + ": " + reply);
        }
        return r;
    }

    private String readLine() {
        try {
            return out.readLine();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Closes the launcher's stdin: it stops every server it started, by pid, and exits. */
    @Override
    public synchronized void close() {
        if (!process.isAlive()) {
            return;
        }
        try {
            in.close();
        } catch (IOException ignored) {
            // already gone: waitFor below settles it
        }
        try {
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(); // its servers die with it (PR_SET_PDEATHSIG)
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
