package org.knowledgeplatform.neo4j;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.kernel.api.procedure.GlobalProcedures;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * Runs Neo4j Community embedded in this JVM with only the Bolt connector, bound to loopback.
 *
 * <p>Usage: {@code Launcher <data-dir>}. Environment: {@code NEO4J_BOLT_HOST} (default 127.0.0.1),
 * {@code NEO4J_BOLT_PORT} (default 7687), {@code NEO4J_PAGECACHE} (default 1g),
 * {@code NEO4J_TX_MEMORY_MAX} (default 1g, 0 for unlimited), {@code NEO4J_PASSWORD} (when set, auth is on
 * and the user {@code neo4j} gets this password; unset, auth is off).
 *
 * <p>Registers the platform's procedures ({@link TransferProcedures}), then prints
 * {@code READY bolt://host:port} on stdout once Bolt accepts connections. SIGTERM and
 * SIGINT run a shutdown hook that stops the database cleanly, so the store survives stop/start.
 */
public final class Launcher {

    private static final long READY_TIMEOUT_MS = 180_000L;

    private Launcher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: Launcher <data-dir>");
            System.exit(64);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home);

        String host = env("NEO4J_BOLT_HOST", "127.0.0.1");
        int port = Integer.parseInt(env("NEO4J_BOLT_PORT", "7687"));
        if (!portIsFree(host, port)) {
            System.err.println("ERROR bolt port " + host + ":" + port + " is already in use");
            System.exit(2);
        }

        Map<String, String> config = new LinkedHashMap<>();
        config.put("server.bolt.enabled", "true");
        config.put("server.bolt.listen_address", host + ":" + port);
        config.put("server.bolt.advertised_address", host + ":" + port);
        // With NEO4J_PASSWORD set (platform/run.py and the test session always set one) Bolt
        // needs the user `neo4j` with that password, so no other local user can read the graph.
        String password = System.getenv("NEO4J_PASSWORD");
        boolean auth = password != null && !password.isBlank();
        config.put("dbms.security.auth_enabled", Boolean.toString(auth));
        config.put("server.memory.pagecache.size", env("NEO4J_PAGECACHE", "1g"));
        config.put("dbms.memory.transaction.total.max", env("NEO4J_TX_MEMORY_MAX", "1g"));
        config.put("db.tx_log.rotation.retention_policy", "2 files");

        long started = System.nanoTime();
        // The settings are written as a properties file and loaded by the builder, so they are the
        // same keys an operator would put in neo4j.conf; the file is rewritten on every start.
        Path conf = home.resolve("conf").resolve("neo4j.conf");
        Files.createDirectories(conf.getParent());
        StringBuilder text = new StringBuilder("# written by the knowledge platform launcher at each start\n");
        config.forEach((key, value) -> text.append(key).append('=').append(value).append('\n'));
        Files.writeString(conf, text.toString());

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .loadPropertiesFromFile(conf)
                .build();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("STOPPING");
            System.out.flush();
            try {
                dbms.shutdown();
            } finally {
                System.out.println("STOPPED");
                System.out.flush();
                stopped.countDown();
            }
        }, "neo4j-shutdown"));

        if (auth) {
            // The password is set in the system database before READY is printed; it is passed as a
            // parameter, never on a command line.
            try {
                dbms.database("system").executeTransactionally(
                        "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                        Map.of("password", password.trim()));
            } catch (RuntimeException e) {
                // a restart on the same store: the password is already this one
                if (!String.valueOf(e.getMessage()).contains("cannot be the same")) {
                    System.err.println("ERROR could not set the neo4j password: " + e.getMessage());
                    System.exit(4);
                }
            }
        }
        registerFunctions(dbms);
        waitForBolt(host, port);
        long tookMs = (System.nanoTime() - started) / 1_000_000L;
        System.out.println("READY bolt://" + host + ":" + port + " home=" + home + " started_ms=" + tookMs);
        System.out.flush();
        stopped.await();
    }

    /** The platform's own procedures (TransferProcedures), for every database of the DBMS. */
    private static void registerFunctions(DatabaseManagementService dbms) {
        GraphDatabaseAPI system = (GraphDatabaseAPI) dbms.database("system");
        try {
            GlobalProcedures procedures = system.getDependencyResolver().resolveDependency(GlobalProcedures.class);
            procedures.registerProcedure(TransferProcedures.class);
            procedures.registerFunction(TransferProcedures.class);
        } catch (Exception e) {
            System.err.println("ERROR could not register the platform's procedures: " + e.getMessage());
            System.exit(5);
        }
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isBlank() ? fallback : value.trim();
    }

    private static boolean portIsFree(String host, int port) {
        try (ServerSocket socket = new ServerSocket()) {
            socket.setReuseAddress(true);
            socket.bind(new InetSocketAddress(host, port));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static void waitForBolt(String host, int port) throws InterruptedException {
        long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(host, port), 500);
                return;
            } catch (IOException e) {
                Thread.sleep(100);
            }
        }
        System.err.println("ERROR bolt did not accept connections within " + READY_TIMEOUT_MS + " ms");
        System.exit(3);
    }
}
