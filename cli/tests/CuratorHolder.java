import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

/**
 * One Apache Curator {@code InterProcessMutex} holder beside {@code lockgate run}
 * (beside_libraries.rs), run as a single-file program on the JVM suite's test class path:
 * {@code java -cp <cp> CuratorHolder.java CONNECT PATH HOLD_MS WHO LOG READY}.
 *
 * <p>It queues on PATH and creates READY once its node is on the server (holding or waiting),
 * so the test can line the next contender up behind it; once granted it appends {@code start
 * <czxid> WHO} to LOG, waits until {@code go} exists beside LOG, holds HOLD_MS, appends
 * {@code end <czxid> WHO} and releases. The czxid of its node is what lockgate reports as the
 * fencing token of a grant on the same path.
 */
public final class CuratorHolder {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], who = args[3];
        long holdMs = Long.parseLong(args[2]);
        Path log = Path.of(args[4]), ready = Path.of(args[5]), go = log.resolveSibling("go");
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 60_000, 15_000, new RetryOneTime(100))) {
            client.start();
            if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("cannot connect to " + connect);
            }
            InterProcessMutex mutex = new InterProcessMutex(client, path);
            int before = participants(mutex).size();
            // Curator's locks belong to the thread that acquired them: one thread holds and
            // releases, this one says when its node is queued.
            CompletableFuture<Void> held = CompletableFuture.runAsync(() -> {
                try {
                    mutex.acquire();
                    String node = participants(mutex).iterator().next();
                    long czxid = client.checkExists().forPath(node.startsWith("/") ? node : path + "/" + node).getCzxid();
                    append(log, "start " + czxid + " " + who);
                    while (!Files.exists(go)) {
                        Thread.sleep(10);
                    }
                    Thread.sleep(holdMs);
                    append(log, "end " + czxid + " " + who);
                    mutex.release();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            while (!held.isDone() && participants(mutex).size() <= before) {
                Thread.sleep(10);
            }
            Files.writeString(ready, who + "\n");
            held.get(120, TimeUnit.SECONDS);
        }
    }

    private static Collection<String> participants(InterProcessMutex mutex) throws Exception {
        try {
            return mutex.getParticipantNodes();
        } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
            return java.util.List.of();
        }
    }

    private static void append(Path log, String line) throws Exception {
        Files.writeString(log, line + "\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }
}
