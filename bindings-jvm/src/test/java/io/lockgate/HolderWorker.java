package io.lockgate;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A separate JVM that takes holds and never releases them, for crash and exit tests: the test
 * kills it (SIGKILL, SIGTERM, SIGINT) or it exits by itself. Prints one fencing token per line
 * once everything is held, then sleeps (or exits).
 * Args: URL KIND NAME LEASE_MS COUNT_OR_VALUE, KIND one of
 * <ul>
 *   <li>{@code semaphore}: takes every one of COUNT permits;</li>
 *   <li>{@code leader}: campaigns with VALUE;</li>
 *   <li>{@code lock}: lock() through the Lock interface;</li>
 *   <li>{@code lock-own-hook}: the same, with a shutdown hook of its own that calls
 *       {@code client.close()} (racing lockgate's exit hook);</li>
 *   <li>{@code lease-exit}: acquires a lease, prints its token, waits for a line on its input
 *       (the test has seen the lease held) and returns from main (normal exit) if VALUE is
 *       {@code return}, else calls {@code System.exit(0)};</li>
 *   <li>{@code wait}: prints {@code waiting} and waits up to 60 s for the lock (the test holds
 *       it), then prints the token if it ever gets it.</li>
 * </ul>
 * Nothing is released explicitly: leases are renewed by the watchdog while the process lives.
 */
public final class HolderWorker {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        String kind = args[1];
        String name = args[2];
        LockOptions options = LockOptions.renewedLease(Duration.ofMillis(Long.parseLong(args[3])));
        LockgateClient client = LockgateClient.connect(url);
        List<Lease> held = new ArrayList<>();
        switch (kind) {
            case "semaphore":
                int permits = Integer.parseInt(args[4]);
                for (int i = 0; i < permits; i++) { // one object per permit held at once
                    held.add(client.getSemaphore(name, permits, options).acquire(Duration.ofSeconds(10)));
                }
                break;
            case "leader":
                held.add(client.getElection(name, options).campaign(args[4], Duration.ofSeconds(10)));
                break;
            case "lock-own-hook":
                Runtime.getRuntime().addShutdownHook(new Thread(client::close, "worker-close"));
                // fall through: hold like "lock"
            case "lock":
                DistributedLock lock = client.getLock(name, options);
                lock.lock();
                held.add(lock.currentLease().orElseThrow());
                break;
            case "lease-exit":
                System.out.println(client.getLock(name, options).acquire(Duration.ofSeconds(10)).fencingToken().getAsLong());
                System.out.flush();
                System.in.read(); // the go-ahead: the test checks the hold before the exit races it
                if (args[4].equals("return")) {
                    return; // main ends; the JVM exits normally (lockgate's threads are daemons)
                }
                System.exit(0);
                break;
            case "wait":
                System.out.println("waiting");
                System.out.flush();
                held.add(client.getLock(name, options).acquire(Duration.ofSeconds(60)));
                break;
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
        StringBuilder out = new StringBuilder();
        for (Lease l : held) {
            out.append(l.fencingToken().getAsLong()).append('\n');
        }
        System.out.print(out);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    /** Starts a worker JVM; read its tokens with {@link #tokens}. */
    static Process start(RedisServer server, String kind, String name, long leaseMs, String arg) throws Exception {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        String java = System.getProperty("java.home") + "/bin/java";
        List<String> command = new ArrayList<>();
        // A process started in the background by a shell without job control (as CI may run the
        // suite) inherits SIGINT ignored, and a JVM that starts with SIGINT ignored never reacts
        // to it. The worker stands for a foreground program that Ctrl-C reaches, so restore the
        // default disposition before exec (perl is part of every Debian/Ubuntu base system).
        if (new java.io.File("/usr/bin/perl").canExecute()) {
            command.addAll(List.of("/usr/bin/perl", "-e", "$SIG{INT} = 'DEFAULT'; exec { $ARGV[0] } @ARGV or die $!"));
        }
        command.addAll(List.of(java, "-cp", cp, HolderWorker.class.getName(),
            server.url(), kind, name, String.valueOf(leaseMs), arg));
        return new ProcessBuilder(command)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    }

    /** Reads {@code n} token lines from the worker's output (blocks until it printed them). */
    static List<Long> tokens(Process p, int n) throws Exception {
        java.io.BufferedReader r = new java.io.BufferedReader(
            new java.io.InputStreamReader(p.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
        List<Long> tokens = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String line = r.readLine();
            if (line == null) {
                throw new IllegalStateException("worker exited before holding (exit " + p.waitFor() + ")");
            }
            tokens.add(Long.parseLong(line.trim()));
        }
        return tokens;
    }
}
