package io.lockgate;

import java.time.Duration;

/**
 * A separate JVM for the cross-process test: increments a plain Redis counter with a
 * non-atomic GET + SET inside the lock, and prints each fencing token it got.
 * Args: URL PORT LOCK_NAME COUNTER_KEY ITERATIONS
 */
public final class CounterWorker {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        int port = Integer.parseInt(args[1]);
        String lockName = args[2];
        String counter = args[3];
        int n = Integer.parseInt(args[4]);
        StringBuilder out = new StringBuilder();
        try (LockgateClient client = LockgateClient.connect(url); Resp raw = new Resp(port)) {
            DistributedLock lock = client.getLock(lockName);
            for (int i = 0; i < n; i++) {
                try (Lease lease = lock.acquire(Duration.ofSeconds(60))) {
                    increment(raw, counter);
                    out.append(lease.fencingToken().getAsLong()).append('\n');
                }
            }
        }
        System.out.print(out);
        System.out.flush();
    }

    /** GET, a pause that invites a race, SET: only mutual exclusion keeps it correct. */
    static void increment(Resp raw, String counter) throws InterruptedException {
        String v = raw.str("GET", counter);
        Thread.sleep(1);
        raw.call("SET", counter, String.valueOf((v == null ? 0 : Long.parseLong(v)) + 1));
    }
}
