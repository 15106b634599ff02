package io.lockgate;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * The JVM conformance actor: one JSON operation per line on stdin, performed through lockgate's
 * public Java API only, one JSON reply per line on stdout (protocol: conformance/README.md).
 * Run from the repository root after {@code bindings-jvm/ci.sh build}:
 * {@code bindings-jvm/conformance-actor.sh}.
 */
public final class ConformanceActor {
    private LockgateClient client;
    /** The actor's library handles by {@code handle} name (default: the lock name). */
    private final Map<String, Handle> handles = new HashMap<>();

    /** How a handle acquires: a lock, a semaphore permit, or a campaign for leadership. */
    private interface Acquire {
        Lease acquire(Duration timeout) throws InterruptedException;
    }

    /**
     * One library handle and the stack of leases acquired through it, most recent last
     * (conformance/README.md, "Primitive options").
     */
    private static final class Handle {
        final Acquire acquire;
        final Supplier<Optional<Lease>> tryAcquire;
        final Deque<Lease> leases = new ArrayDeque<>();

        Handle(Acquire acquire, Supplier<Optional<Lease>> tryAcquire) {
            this.acquire = acquire;
            this.tryAcquire = tryAcquire;
        }
    }

    /** A step the actor itself cannot express through the library (an unknown kind, a permit count no int holds). */
    private static final class Refused extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Refused(String message) {
            super(message);
        }
    }

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
            Map<String, Object> reply;
            if ("reset".equals(op.get("op"))) {
                // The orchestrator reuses this process for its next run: as a fresh actor.
                actor.close();
                actor = new ConformanceActor();
                reply = ok();
            } else {
                reply = actor.handle(op);
            }
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

    private static Map<String, Object> error(String code, boolean retryable) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ok", false);
        m.put("error", code);
        m.put("retryable", retryable);
        return m;
    }

    private static Map<String, Object> error(LockException e) {
        return error(e.code(), e.isRetryable());
    }

    private static Map<String, Object> notHeld() {
        return error("NOT_HELD", false);
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

    private static LockOptions optionsOf(Map<String, Object> op) {
        LockOptions.Builder b = LockOptions.builder();
        Duration lease = millis(op, "lease_ms");
        if (lease != null) {
            b.lease(lease).autoRenew(Boolean.TRUE.equals(op.get("renew")));
        }
        Duration ttl = millis(op, "entry_ttl_ms");
        if (ttl != null) {
            b.entryTtl(ttl);
        }
        if (Boolean.TRUE.equals(op.get("reentrant"))) {
            b.reentrant(true);
        }
        b.minHold(millis(op, "min_hold_ms")).maxHold(millis(op, "max_hold_ms"));
        return b.build();
    }

    /** Builds the handle a step describes: {@code kind}, {@code permits}, {@code value}, {@code writers_first}, options. */
    private Handle makeHandle(String name, Map<String, Object> op) {
        LockOptions options = optionsOf(op);
        String kind = String.valueOf(op.getOrDefault("kind", "mutex"));
        switch (kind) {
            case "mutex": {
                DistributedLock lock = client.getLock(name, options);
                return new Handle(lock::acquire, lock::tryAcquire);
            }
            case "semaphore": {
                // Passed through untouched; only counts an int cannot hold are turned away here.
                long permits = ((Number) op.getOrDefault("permits", 1L)).longValue();
                if (permits != (int) permits) {
                    throw new Refused("permits out of range: " + permits);
                }
                DistributedSemaphore sem = client.getSemaphore(name, (int) permits, options);
                return new Handle(sem::acquire, sem::tryAcquire);
            }
            case "read":
            case "write": {
                DistributedReadWriteLock rw = client.getReadWriteLock(name, options);
                if (op.get("writers_first") instanceof Boolean) {
                    rw = rw.withWritersFirst((Boolean) op.get("writers_first"));
                }
                DistributedLock lock = kind.equals("read") ? rw.readLock() : rw.writeLock();
                return new Handle(lock::acquire, lock::tryAcquire);
            }
            case "leader": {
                LeaderElection election = client.getElection(name, options);
                String value = String.valueOf(op.getOrDefault("value", ""));
                return new Handle(t -> election.campaign(value, t), () -> election.tryCampaign(value));
            }
            default:
                throw new Refused("unknown kind " + kind);
        }
    }

    /** The step's handle ({@code handle}, default the lock name), created on first use with this step's options. */
    private Handle handleFor(String name, Map<String, Object> op) {
        String key = handleKey(name, op);
        Handle h = handles.get(key);
        if (h == null) {
            h = makeHandle(name, op);
            handles.put(key, h);
        }
        return h;
    }

    private static String handleKey(String name, Map<String, Object> op) {
        Object h = op.get("handle");
        return h == null ? name : String.valueOf(h);
    }

    /** The most recent lease of the step's handle, if any. */
    private Lease top(String name, Map<String, Object> op) {
        Handle h = handles.get(handleKey(name, op));
        return h == null ? null : h.leases.peekLast();
    }

    Map<String, Object> handle(Map<String, Object> op) {
        String name = String.valueOf(op.getOrDefault("lock", ""));
        String kind = String.valueOf(op.getOrDefault("op", ""));
        try {
            switch (kind) {
                case "connect": {
                    // Any URL (its scheme picks the backend), the options by their Java names.
                    Map<String, Object> o = op.get("options") instanceof Map<?, ?> m ? cast(m) : Map.of();
                    ClientOptions.Builder b = ClientOptions.builder();
                    if (o.get("prefix") != null) {
                        b.keyPrefix(String.valueOf(o.get("prefix")));
                    }
                    if (o.get("replica_acks") != null) {
                        b.set("replicaAcks", o.get("replica_acks"));
                    }
                    if (o.get("max_lease_ms") != null) {
                        b.set("maxLease", millis(o, "max_lease_ms"));
                    }
                    if (o.get("session_timeout_ms") != null) {
                        b.set("sessionTimeout", millis(o, "session_timeout_ms"));
                    }
                    if (o.get("label") != null) {
                        b.set("label", o.get("label"));
                    }
                    LockgateClient c = LockgateClient.connect(String.valueOf(op.getOrDefault("url", "")), b.build());
                    if (client != null) {
                        client.close();
                    }
                    client = c;
                    Map<String, Object> r = ok();
                    List<Object> caps = new ArrayList<>();
                    c.capabilities().all().forEach((k, v) -> {
                        if (v) {
                            caps.add(k.replaceAll("([A-Z])", "_$1").toLowerCase(java.util.Locale.ROOT));
                        }
                    });
                    r.put("capabilities", caps);
                    return r;
                }
                case "lock":
                    handleFor(name, op);
                    return ok();
                case "acquire":
                case "try_acquire": {
                    Handle h = handleFor(name, op);
                    Lease lease;
                    if (kind.equals("acquire")) {
                        Duration t = millis(op, "timeout_ms");
                        lease = h.acquire.acquire(t == null ? Duration.ZERO : t);
                    } else {
                        lease = h.tryAcquire.get().orElse(null);
                    }
                    Map<String, Object> r = ok();
                    r.put("acquired", lease != null);
                    if (lease != null) {
                        h.leases.addLast(lease);
                        lease.fencingToken().ifPresent(t -> r.put("token", Long.toString(t)));
                    }
                    return r;
                }
                case "release": {
                    Handle h = handles.get(handleKey(name, op));
                    Lease held = h == null ? null : h.leases.peekLast();
                    if (held == null) {
                        return notHeld();
                    }
                    boolean wasHeld = held.release(); // an error reply leaves the stack unchanged
                    h.leases.pollLast();
                    Map<String, Object> r = ok();
                    r.put("was_held", wasHeld);
                    return r;
                }
                case "extend": {
                    Lease held = top(name, op);
                    if (held == null) {
                        return notHeld();
                    }
                    Duration d = millis(op, "ms");
                    held.extend(d == null ? Duration.ZERO : d);
                    return ok();
                }
                case "is_held": {
                    Lease held = top(name, op);
                    Map<String, Object> r = ok();
                    r.put("held", held != null && held.isHeld());
                    return r;
                }
                case "wait_lost": {
                    Lease held = top(name, op);
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
                    // Through the step's handle, without touching its stack of leases.
                    Handle h = handleFor(name, op);
                    Duration hold = millis(op, "hold_ms");
                    long holdNanos = hold == null ? 2_000_000L : hold.toNanos();
                    int times = ((Number) op.getOrDefault("times", 1)).intValue();
                    List<Object> records = new ArrayList<>();
                    for (int i = 0; i < times; i++) {
                        long enter;
                        long leave;
                        Long token;
                        try (Lease lease = h.acquire.acquire(Duration.ofSeconds(30))) {
                            enter = wallNanos();
                            Thread.sleep(holdNanos / 1_000_000L, (int) (holdNanos % 1_000_000L));
                            leave = wallNanos();
                            token = lease.fencingToken().isPresent() ? lease.fencingToken().getAsLong() : null;
                        }
                        List<Object> rec = new ArrayList<>();
                        rec.add(token == null ? null : Long.toString(token));
                        rec.add(Long.toString(enter));
                        rec.add(Long.toString(leave));
                        records.add(rec);
                    }
                    Map<String, Object> r = ok();
                    r.put("records", records);
                    return r;
                }
                case "export": {
                    Lease held = top(name, op);
                    if (held == null) {
                        return notHeld();
                    }
                    Map<String, Object> r = ok();
                    r.put("identity", held.identity());
                    return r;
                }
                case "adopt": {
                    // The adopted lease joins the stack of the step's handle, as an acquire's would.
                    Lease lease = client.adopt((String) op.getOrDefault("identity", ""), optionsOf(op));
                    handleFor(name, op).leases.addLast(lease);
                    Map<String, Object> r = ok();
                    r.put("acquired", true);
                    lease.fencingToken().ifPresent(t -> r.put("token", Long.toString(t)));
                    return r;
                }
                case "break": {
                    Long token = op.containsKey("token") ? Long.valueOf(Long.parseUnsignedLong((String) op.get("token"))) : null;
                    Optional<BrokenHolder> b = client.breakLock(name, (String) op.getOrDefault("kind", "mutex"), token);
                    Map<String, Object> r = ok();
                    r.put("broken", b.isPresent());
                    if (b.isPresent()) {
                        r.put("label", b.get().label().orElse(null));
                        r.put("token", b.get().fencingToken().isPresent() ? Long.toString(b.get().fencingToken().getAsLong()) : null);
                    }
                    return r;
                }
                case "inspect": {
                    // With permits, through a semaphore handle (which knows its count); else by name.
                    LockSnapshot s = op.containsKey("permits")
                        ? client.getSemaphore(name, ((Number) op.get("permits")).intValue()).inspect()
                        : client.inspect(name, (String) op.getOrDefault("kind", "mutex"));
                    Map<String, Object> r = ok();
                    Optional<LockSnapshot.Holder> writer = s.holders().stream().filter(h -> !h.shared()).findFirst();
                    r.put("locked", s.isLocked());
                    r.put("holders", s.holders().stream().map(h -> h.label().orElse(null)).toList());
                    r.put("waiters", s.waiters().stream().map(w -> w.label().orElse(null)).toList());
                    r.put("readers", s.holders().stream().filter(LockSnapshot.Holder::shared).count());
                    r.put("writer", writer.isPresent());
                    r.put("token", s.holders().isEmpty() || s.holders().get(0).fencingToken().isEmpty()
                        ? null : Long.toString(s.holders().get(0).fencingToken().getAsLong()));
                    r.put("holds", s.holders().stream().map(h -> h.holds().isPresent() ? (Object) h.holds().getAsLong() : null).toList());
                    r.put("permits", s.permits().isPresent() ? (Object) s.permits().getAsLong() : null);
                    r.put("leader", writer.flatMap(LockSnapshot.Holder::value).orElse(null));
                    return r;
                }
                case "list": {
                    // Pages through every lock under the prefix `lock`; each as "<name after the
                    // prefix> <kind> <holders> <waiters>", sorted, with the labels and pages read.
                    long limit = op.get("limit") instanceof Number n ? n.longValue() : 100;
                    List<String> entries = new ArrayList<>();
                    List<String> labels = new ArrayList<>();
                    int pages = 0;
                    String cursor = null;
                    do {
                        LockPage page = client.listLocks(name, limit, cursor);
                        pages++;
                        for (LockPage.Entry e : page.entries()) {
                            String rest = e.name().startsWith(name) ? e.name().substring(name.length()) : e.name();
                            entries.add(rest + " " + e.kind() + " " + e.holders() + " " + e.waiters());
                            labels.add(e.label().orElse(null));
                        }
                        cursor = page.cursor().orElse(null);
                    } while (cursor != null && pages < 10_000);
                    entries.sort(null);
                    labels.sort(java.util.Comparator.nullsFirst(java.util.Comparator.naturalOrder()));
                    Map<String, Object> r = ok();
                    r.put("entries", entries);
                    r.put("labels", labels);
                    r.put("pages", pages);
                    return r;
                }
                case "observe": {
                    Optional<Leader> leader = client.getElection(name).observe();
                    Map<String, Object> r = ok();
                    r.put("leader", leader.isPresent());
                    leader.ifPresent(l -> {
                        r.put("value", l.value());
                        r.put("token", Long.toString(l.term()));
                    });
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
        } catch (Refused e) {
            return error("INVALID_ARGUMENT", false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return error("CANCELLED", false);
        }
    }

    private static long wallNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> cast(Map<?, ?> m) {
        return (Map<String, Object>) m;
    }

    /** Releases every handle's stack, most recent lease first, then closes the client. */
    void close() {
        for (Handle h : handles.values()) {
            for (Lease l = h.leases.pollLast(); l != null; l = h.leases.pollLast()) {
                try {
                    l.release();
                } catch (LockException ignored) {
                    // best effort on exit
                }
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
