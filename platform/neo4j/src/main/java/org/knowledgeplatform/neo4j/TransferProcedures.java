package org.knowledgeplatform.neo4j;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Spliterator;
import java.util.Spliterators;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

import org.neo4j.graphdb.Transaction;
import org.neo4j.procedure.Context;
import org.neo4j.procedure.Description;
import org.neo4j.procedure.Mode;
import org.neo4j.procedure.Name;
import org.neo4j.procedure.Procedure;
import org.neo4j.procedure.UserFunction;

/**
 * The server's side of export and import (core/graph/transfer.py, docs/portability.md). Through the
 * Python driver each record costs about 20 microseconds of its own and each float of an embedding
 * one decoded value, which held an export at a third of its target: {@code kp.transfer.export}
 * writes the archive's lines here, a page per record, an embedding in the archive's packed form
 * ({@code {"$t": "f32", "v": base64 of little-endian float32}}, for a float list of at least
 * {@link #PACKED_MIN_LENGTH} values whose every value is exactly a float32; NaN never is), and
 * {@code kp.transfer.unpacked} turns packed lists back into float lists as an import writes them.
 *
 * <p>Registered by {@link Launcher} with the embedded DBMS; an external server has none of them and
 * the platform reads and writes through Cypher alone, to the same archive.
 */
public final class TransferProcedures {

    /** The same threshold as core/graph/transfer.py PACKED_MIN_LENGTH. */
    static final int PACKED_MIN_LENGTH = 16;

    static final String PROJECT_ID = "project_id";
    static final String ID = "id";

    @Context
    public Transaction tx;

    /** One page of a project's export: NDJSON lines of one archive member, and the rows the
     * procedure does not write itself (a value of a type JSON lacks, such as a date), for the
     * caller to write. */
    public static final class ExportPage {
        public final String member;
        public final byte[] lines;
        public final long count;
        public final Map<String, Long> counts;
        public final List<Map<String, Object>> rows;
        public final long skipped;

        ExportPage(String member, byte[] lines, long count, Map<String, Long> counts,
                List<Map<String, Object>> rows, long skipped) {
            this.member = member;
            this.lines = lines;
            this.count = count;
            this.counts = counts;
            this.rows = rows;
            this.skipped = skipped;
        }
    }

    @Procedure(name = "kp.transfer.export", mode = Mode.READ)
    @Description("kp.transfer.export(projectId, labels, size) - the project's nodes with the labels, "
            + "then the relationships between them, as archive lines (docs/portability.md), `size` rows "
            + "per record")
    public Stream<ExportPage> export(
            @Name("projectId") String projectId, @Name("labels") List<String> labels, @Name("size") long size) {
        Export pages = new Export(tx, projectId, labels, pageSize(size));
        return StreamSupport.stream(Spliterators.spliteratorUnknownSize(pages, Spliterator.ORDERED), false)
                .onClose(pages::close);
    }

    @UserFunction(name = "kp.transfer.unpacked")
    @Description("kp.transfer.unpacked(properties) - the map with each packed float32 list as a float list")
    public Map<String, Object> unpacked(@Name("properties") Map<String, Object> properties) {
        if (properties == null) {
            return null;
        }
        Map<String, Object> result = new LinkedHashMap<>(properties.size() * 2);
        for (Map.Entry<String, Object> entry : properties.entrySet()) {
            Object value = entry.getValue();
            result.put(entry.getKey(), value instanceof Map<?, ?> map ? unpack(map) : value);
        }
        return result;
    }

    private static int pageSize(long size) {
        if (size < 1 || size > 100_000) {
            throw new IllegalArgumentException("size must be between 1 and 100000, not " + size);
        }
        return (int) size;
    }

    /** `properties` with each long float32 list replaced by its packed form. */
    static Map<String, Object> packed(Map<String, Object> properties) {
        Map<String, Object> result = new LinkedHashMap<>(properties.size() * 2);
        for (Map.Entry<String, Object> entry : properties.entrySet()) {
            Object value = entry.getValue();
            String packed = value instanceof double[] doubles ? pack(doubles) : null;
            if (packed == null) {
                result.put(entry.getKey(), value);
            } else {
                Map<String, Object> form = new LinkedHashMap<>(4);
                form.put("$t", "f32");
                form.put("v", packed);
                result.put(entry.getKey(), form);
            }
        }
        return result;
    }

    /** The base64 of `values` as little-endian float32, or null unless it is long enough and every
     * value is exactly a float32. */
    static String pack(double[] values) {
        byte[] bytes = packBytes(values);
        return bytes == null ? null : Base64.getEncoder().encodeToString(bytes);
    }

    /** `values` as little-endian float32, or null unless it is long enough and every value is
     * exactly a float32. */
    static byte[] packBytes(double[] values) {
        if (values.length < PACKED_MIN_LENGTH) {
            return null;
        }
        ByteBuffer buffer = ByteBuffer.allocate(values.length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (double value : values) {
            float single = (float) value;
            if ((double) single != value) {
                return null;
            }
            buffer.putFloat(single);
        }
        return buffer.array();
    }

    /** The doubles a packed map stands for; any other map is refused, as Neo4j cannot store one. */
    static double[] unpack(Map<?, ?> map) {
        Object raw = map.get("v");
        if (map.size() != 2 || !"f32".equals(map.get("$t")) || !(raw instanceof String text)) {
            throw new IllegalArgumentException("a property value is a map other than a packed float list");
        }
        byte[] bytes;
        try {
            bytes = Base64.getDecoder().decode(text);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("a packed float list is not base64", e);
        }
        if (bytes.length % Float.BYTES != 0) {
            throw new IllegalArgumentException("a packed float list's length is not a multiple of 4 bytes");
        }
        ByteBuffer buffer = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        double[] values = new double[bytes.length / Float.BYTES];
        for (int i = 0; i < values.length; i++) {
            values[i] = buffer.getFloat();
        }
        return values;
    }
}
