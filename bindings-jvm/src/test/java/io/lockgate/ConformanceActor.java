package io.lockgate;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The JVM conformance actor: one JSON operation per line on stdin, performed through lockgate's
 * public Java API only, one JSON reply per line on stdout (protocol: conformance/README.md).
 * Run from the repository root after {@code bindings-jvm/ci.sh build}:
 * {@code bindings-jvm/conformance-actor.sh}.
 */
public final class ConformanceActor {
    private LockgateClient client;
    private final Map<String, Lease> leases = new HashMap<>();

    public static void main(String[] args) throws Exception {
        ConformanceActor actor = new ConformanceActor();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            Map<String, Object> op;
            try {
                op = Json.object(line);
            } catch (RuntimeException e) {
                op = Map.of("op", "invalid");
            }
            if ("exit".equals(op.get("op"))) {
                break;
            }
            Map<String, Object> reply = actor.handle(op);
            reply.put("id", op.get("id"));
            out.println(Json.write(reply));
            out.flush();
        }
        actor.close();
        System.exit(0);
    }

    private static Map<String, Object> ok() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ok", true);
        return m;
    }

    private static Map<String, Object> error(LockException e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ok", false);
        m.put("error", e.code());
        m.put("retryable", e.isRetryable());
        return m;
    }

    private static Map<String, Object> notHeld() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ok", false);
        m.put("error", "NOT_HELD");
        m.put("retryable", false);
        return m;
    }

    /** A millisecond field as a Duration, untouched in sign (the library rejects bad values). */
    private static Duration millis(Map<String, Object> op, String key) {
        Object v = op.get(key);
        if (v == null) {
            return null;
        }
        double ms = ((Number) v).doubleValue();
        return Duration.ofNanos((long) (ms * 1_000_000.0));
    }

    private DistributedLock lockOf(Map<String, Object> op) {
        LockOptions.Builder b = LockOptions.builder();
        Duration lease = millis(op, "lease_ms");
        if (lease != null) {
            b.lease(lease).autoRenew(Boolean.TRUE.equals(op.get("renew")));
        }
        Duration ttl = millis(op, "entry_ttl_ms");
        if (ttl != null) {
            b.entryTtl(ttl);
        }
        return client.getLock(String.valueOf(op.getOrDefault("lock", "")), b.build());
    }

    Map<String, Object> handle(Map<String, Object> op) {
        String name = String.valueOf(op.getOrDefault("lock", ""));
        String kind = String.valueOf(op.getOrDefault("op", ""));
        try {
            switch (kind) {
                case "connect": {
                    ClientOptions.Builder b = ClientOptions.builder();
                    if (op.get("prefix") != null) {
                        b.keyPrefix(String.valueOf(op.get("prefix")));
                    }
                    LockgateClient c = LockgateClient.connect(String.valueOf(op.getOrDefault("url", "")), b.build());
                    if (client != null) {
                        client.close();
                    }
                    client = c;
                    return ok();
                }
                case "lock":
                    lockOf(op);
                    return ok();
                case "acquire":
                case "try_acquire": {
                    DistributedLock lock = lockOf(op);
                    Lease lease;
                    if (kind.equals("acquire")) {
                        Duration t = millis(op, "timeout_ms");
                        lease = lock.acquire(t == null ? Duration.ZERO : t);
                    } else {
                        lease = lock.tryAcquire().orElse(null);
                    }
                    Map<String, Object> r = ok();
                    r.put("acquired", lease != null);
                    if (lease != null) {
                        leases.put(name, lease);
                        r.put("token", Long.toString(lease.fencingToken()));
                    }
                    return r;
                }
                case "release": {
                    Lease held = leases.remove(name);
                    if (held == null) {
                        return notHeld();
                    }
                    Map<String, Object> r = ok();
                    r.put("was_held", held.release());
                    return r;
                }
                case "extend": {
                    Lease held = leases.get(name);
                    if (held == null) {
                        return notHeld();
                    }
                    Duration d = millis(op, "ms");
                    held.extend(d == null ? Duration.ZERO : d);
                    return ok();
                }
                case "is_held": {
                    Lease held = leases.get(name);
                    Map<String, Object> r = ok();
                    r.put("held", held != null && held.isHeld());
                    return r;
                }
                case "wait_lost": {
                    Lease held = leases.get(name);
                    if (held == null) {
                        return notHeld();
                    }
                    CompletableFuture<LockException> reason = new CompletableFuture<>();
                    held.onLost(reason::complete);
                    Duration t = millis(op, "timeout_ms");
                    Map<String, Object> r = ok();
                    try {
                        LockException e = reason.get(t == null ? 5000 : t.toMillis(), TimeUnit.MILLISECONDS);
                        r.put("lost", true);
                        r.put("error", e.code());
                    } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
                        r.put("lost", false);
                    }
                    return r;
                }
                case "hammer": {
                    DistributedLock lock = lockOf(op);
                    Duration hold = millis(op, "hold_ms");
                    long holdNanos = hold == null ? 2_000_000L : hold.toNanos();
                    int times = ((Number) op.getOrDefault("times", 1)).intValue();
                    List<Object> records = new ArrayList<>();
                    for (int i = 0; i < times; i++) {
                        long enter;
                        long leave;
                        long token;
                        try (Lease lease = lock.acquire(Duration.ofSeconds(30))) {
                            enter = wallNanos();
                            Thread.sleep(holdNanos / 1_000_000L, (int) (holdNanos % 1_000_000L));
                            leave = wallNanos();
                            token = lease.fencingToken();
                        }
                        records.add(List.of(Long.toString(token), Long.toString(enter), Long.toString(leave)));
                    }
                    Map<String, Object> r = ok();
                    r.put("records", records);
                    return r;
                }
                default: {
                    Map<String, Object> r = new LinkedHashMap<>();
                    r.put("ok", false);
                    r.put("error", "UNSUPPORTED_OP");
                    r.put("detail", kind);
                    return r;
                }
            }
        } catch (LockException e) {
            return error(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("ok", false);
            r.put("error", "CANCELLED");
            r.put("retryable", false);
            return r;
        }
    }

    private static long wallNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    void close() {
        for (Lease l : leases.values()) {
            try {
                l.release();
            } catch (LockException ignored) {
                // best effort on exit
            }
        }
        if (client != null) {
            client.close();
        }
    }

    /** Just enough JSON for the protocol: objects, arrays, strings, numbers, booleans, null. */
    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(String text) {
            Json p = new Json(text);
            Object v = p.value();
            if (!(v instanceof Map)) {
                throw new IllegalArgumentException("not a JSON object");
            }
            return (Map<String, Object>) v;
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private Object value() {
            ws();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    ws();
                    String k = string();
                    ws();
                    expect(':');
                    m.put(k, value());
                    ws();
                    if (s.charAt(i) == ',') {
                        i++;
                        continue;
                    }
                    expect('}');
                    return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                ws();
                if (s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    ws();
                    if (s.charAt(i) == ',') {
                        i++;
                        continue;
                    }
                    expect(']');
                    return l;
                }
            }
            if (c == '"') {
                return string();
            }
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String num = s.substring(start, i);
            if (num.matches("-?\\d+")) {
                try {
                    return Long.parseLong(num);
                } catch (NumberFormatException e) {
                    return Double.parseDouble(num);
                }
            }
            return Double.parseDouble(num);
        }

        private void expect(char c) {
            if (s.charAt(i) != c) {
                throw new IllegalArgumentException("expected " + c + " at " + i);
            }
            i++;
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c == '\\') {
                    char e = s.charAt(i++);
                    switch (e) {
                        case 'n': b.append('\n'); break;
                        case 't': b.append('\t'); break;
                        case 'r': b.append('\r'); break;
                        case 'b': b.append('\b'); break;
                        case 'f': b.append('\f'); break;
                        case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                        default: b.append(e);
                    }
                } else {
                    b.append(c);
                }
            }
        }

        static String write(Object v) {
            if (v == null) {
                return "null";
            }
            if (v instanceof Boolean || v instanceof Number) {
                return v.toString();
            }
            if (v instanceof Map) {
                StringBuilder b = new StringBuilder("{");
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (b.length() > 1) {
                        b.append(',');
                    }
                    b.append(write(String.valueOf(e.getKey()))).append(':').append(write(e.getValue()));
                }
                return b.append('}').toString();
            }
            if (v instanceof List) {
                StringBuilder b = new StringBuilder("[");
                for (Object o : (List<?>) v) {
                    if (b.length() > 1) {
                        b.append(',');
                    }
                    b.append(write(o));
                }
                return b.append(']').toString();
            }
            StringBuilder b = new StringBuilder("\"");
            for (char c : v.toString().toCharArray()) {
                if (c == '"' || c == '\\') {
                    b.append('\\').append(c);
                } else if (c < 0x20) {
                    b.append(String.format("\\u%04x", (int) c));
                } else {
                    b.append(c);
                }
            }
            return b.append('"').toString();
        }
    }
}
