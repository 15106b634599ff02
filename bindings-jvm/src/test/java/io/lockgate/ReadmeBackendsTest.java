package io.lockgate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README's per-backend examples run as written (issue 23, item 10): every {@code java example}
 * block of bindings-jvm/README.md is compiled and its {@code main} run against real servers from
 * the project's launcher, with the one substitution the README states: the URL string in the
 * example is replaced, whole, by the launched server's URL of that backend.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ReadmeBackendsTest {
    private static final Pattern BLOCK = Pattern.compile("(?ms)^```java example\\n(.*?)^```$");
    private static final Pattern URL_LITERAL = Pattern.compile(
        "\"((?:redis|rediss|redis\\+cluster|redlock|zookeeper|etcd|postgres|postgresql|mysql|mariadb)://[^\"]*)\"");
    private static final Pattern CLASS = Pattern.compile("public class (\\w+)");
    private static final Map<String, String> KIND = Map.of("redis", "single", "redis+cluster", "cluster",
        "redlock", "redlock", "zookeeper", "zookeeper", "etcd", "etcd", "postgres", "postgres", "mysql", "mariadb");
    private static final Map<String, TestServers> launched = new HashMap<>();

    @AfterAll
    static void stop() {
        launched.values().forEach(TestServers::close);
    }

    private static List<String> examples() throws Exception {
        String readme = Files.readString(Paths.get("README.md"), StandardCharsets.UTF_8);
        List<String> out = new ArrayList<>();
        Matcher m = BLOCK.matcher(readme);
        while (m.find()) out.add(m.group(1));
        return out;
    }

    private static String scheme(String code) {
        Matcher m = URL_LITERAL.matcher(code);
        assertTrue(m.find(), "an example names no URL:\n" + code);
        return m.group(1).substring(0, m.group(1).indexOf("://"));
    }

    private static String urlOf(String kind) {
        TestServers s = launched.computeIfAbsent(kind, TestServers::start);
        String url = (String) s.info.get("url");
        return kind.equals("cluster") ? "redis+cluster://" + url.substring(url.indexOf("://") + 3) : url;
    }

    @Test
    void everyBackendHasAnExampleAndEachRuns(@TempDir Path dir) throws Exception {
        List<String> examples = examples();
        TreeSet<String> schemes = new TreeSet<>();
        for (String code : examples) schemes.add(scheme(code));
        assertEquals(new TreeSet<>(KIND.keySet()), schemes, "one example per backend");

        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        for (String code : examples) {
            String url = urlOf(KIND.get(scheme(code)));
            String source = URL_LITERAL.matcher(code).replaceAll(Matcher.quoteReplacement("\"" + url + "\""));
            Matcher cls = CLASS.matcher(source);
            assertTrue(cls.find(), "an example is a public class:\n" + code);
            Path file = dir.resolve(cls.group(1) + ".java");
            Files.writeString(file, source);
            ByteArrayOutputStream errors = new ByteArrayOutputStream();
            int rc = javac.run(null, errors, errors, "-cp", classpath, "-d", dir.toString(), file.toString());
            assertEquals(0, rc, "compiles as written:\n" + source + "\n" + errors);

            PrintStream stdout = System.out;
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            try (URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()}, getClass().getClassLoader())) {
                Method main = loader.loadClass(cls.group(1)).getMethod("main", String[].class);
                System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
                main.invoke(null, (Object) new String[0]);
            } finally {
                System.setOut(stdout);
            }
            String out = printed.toString(StandardCharsets.UTF_8);
            System.out.print(out);
            assertTrue(out.contains("token"), cls.group(1) + " printed: " + out);
        }
    }
}
