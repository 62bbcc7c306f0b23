package org.knowledgeplatform.neo4j;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.function.IntPredicate;

import org.neo4j.graphdb.Direction;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.Relationship;
import org.neo4j.graphdb.ResourceIterator;
import org.neo4j.graphdb.Transaction;

/**
 * The pages of {@code kp.transfer.export}: first every node of the project with one of the labels
 * (label by label), then the relationships leaving them, in one read transaction. A relationship is
 * written only when both its ends were (the same rule as portability/exporter.py). Lines are the
 * archive's: {@code {"label", "props"}} and {@code {"type", "start_label", "start", "end_label",
 * "end", "props"}}; a row with a value JSON has no type for (temporal values, points, byte arrays,
 * NaN) is handed back whole, for the caller's encoder.
 */
final class Export implements Iterator<TransferProcedures.ExportPage>, AutoCloseable {

    static final String NODES = "nodes";
    static final String RELATIONSHIPS = "relationships";

    private final Transaction tx;
    private final String projectId;
    private final List<String> labels;
    private final Set<String> known;
    private final int size;
    private final Set<String> ids = new HashSet<>();

    private String member = NODES;
    private int labelIndex = -1;
    private String label;
    private ResourceIterator<Node> found;
    private boolean done;

    Export(Transaction tx, String projectId, List<String> labels, int size) {
        this.tx = tx;
        this.projectId = projectId;
        this.labels = List.copyOf(labels);
        this.known = new LinkedHashSet<>(labels);
        this.size = size;
    }

    /** Moves to the next label (and from nodes to relationships) until one has a node left. */
    private boolean advance() {
        while (!done && (found == null || !found.hasNext())) {
            close();
            labelIndex++;
            if (labelIndex >= labels.size()) {
                if (RELATIONSHIPS.equals(member) || labels.isEmpty()) {
                    done = true;
                    break;
                }
                member = RELATIONSHIPS;
                labelIndex = 0;
            }
            label = labels.get(labelIndex);
            found = tx.findNodes(Label.label(label), TransferProcedures.PROJECT_ID, projectId);
        }
        return !done;
    }

    @Override
    public boolean hasNext() {
        return advance();
    }

    @Override
    public TransferProcedures.ExportPage next() {
        if (!advance()) {
            throw new NoSuchElementException();
        }
        Json json = new Json();
        Map<String, Long> counts = new LinkedHashMap<>();
        List<Map<String, Object>> rows = new ArrayList<>();
        long lines = 0;
        long skipped = 0;
        int seen = 0;
        while (seen < size && found.hasNext()) {
            Node node = found.next();
            if (NODES.equals(member)) {
                Object id = node.getProperty(TransferProcedures.ID, null);
                if (id instanceof String text) {
                    ids.add(text);
                }
                Map<String, Object> props = node.getAllProperties();
                if (json.node(label, props)) {
                    lines++;
                } else {
                    Map<String, Object> row = new LinkedHashMap<>();
                    row.put("label", label);
                    row.put("props", TransferProcedures.packed(props));
                    rows.add(row);
                }
                counts.merge(label, 1L, Long::sum);
                seen++;
                continue;
            }
            Object start = node.getProperty(TransferProcedures.ID, null);
            for (Relationship relationship : node.getRelationships(Direction.OUTGOING)) {
                Node end = relationship.getEndNode();
                if (!projectId.equals(end.getProperty(TransferProcedures.PROJECT_ID, null))) {
                    continue;
                }
                Object endId = end.getProperty(TransferProcedures.ID, null);
                String endLabel = null;
                for (Label candidate : end.getLabels()) {
                    if (known.contains(candidate.name())) {
                        endLabel = candidate.name();
                        break;
                    }
                }
                if (endLabel == null || !ids.contains(start) || !ids.contains(endId)) {
                    skipped++;
                    continue;
                }
                String type = relationship.getType().name();
                Map<String, Object> props = relationship.getAllProperties();
                if (json.relationship(type, label, (String) start, endLabel, (String) endId, props)) {
                    lines++;
                } else {
                    Map<String, Object> row = new LinkedHashMap<>();
                    row.put("type", type);
                    row.put("start_label", label);
                    row.put("start", start);
                    row.put("end_label", endLabel);
                    row.put("end", endId);
                    row.put("props", TransferProcedures.packed(props));
                    rows.add(row);
                }
                counts.merge(type, 1L, Long::sum);
                seen++;
            }
        }
        return new TransferProcedures.ExportPage(member, json.bytes(), lines, counts, rows, skipped);
    }

    @Override
    public void close() {
        if (found != null) {
            found.close();
            found = null;
        }
    }

    /** NDJSON of the rows whose every value has a JSON form, as UTF-8; a row that has another is
     * left out whole (what was written of it is taken back). A long float32 list is written in its
     * packed form (TransferProcedures.pack). */
    static final class Json {
        private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
        private byte[] out = new byte[1 << 20];
        private int length;

        boolean node(String label, Map<String, Object> props) {
            int mark = length;
            ascii("{\"label\":");
            string(label);
            ascii(",\"props\":");
            return end(mark, map(props));
        }

        boolean relationship(String type, String startLabel, String start, String endLabel, String end,
                Map<String, Object> props) {
            int mark = length;
            ascii("{\"type\":");
            string(type);
            ascii(",\"start_label\":");
            string(startLabel);
            ascii(",\"start\":");
            string(start);
            ascii(",\"end_label\":");
            string(endLabel);
            ascii(",\"end\":");
            string(end);
            ascii(",\"props\":");
            return end(mark, map(props));
        }

        byte[] bytes() {
            return Arrays.copyOf(out, length);
        }

        private boolean end(int mark, boolean written) {
            if (!written) {
                length = mark;
                return false;
            }
            ascii("}\n");
            return true;
        }

        private void room(int more) {
            if (length + more > out.length) {
                out = Arrays.copyOf(out, Math.max(out.length * 2, length + more));
            }
        }

        private void put(int b) {
            room(1);
            out[length++] = (byte) b;
        }

        private boolean ascii(String text) {
            room(text.length());
            for (int i = 0; i < text.length(); i++) {
                out[length++] = (byte) text.charAt(i);
            }
            return true;
        }

        private void raw(byte[] bytes) {
            room(bytes.length);
            System.arraycopy(bytes, 0, out, length, bytes.length);
            length += bytes.length;
        }

        private boolean map(Map<String, Object> props) {
            put('{');
            boolean first = true;
            for (Map.Entry<String, Object> entry : props.entrySet()) {
                if (!first) {
                    put(',');
                }
                first = false;
                if (!string(entry.getKey())) {
                    return false;
                }
                put(':');
                if (!value(entry.getValue())) {
                    return false;
                }
            }
            put('}');
            return true;
        }

        private boolean value(Object value) {
            if (value instanceof String s) {
                return string(s);
            }
            if (value instanceof Boolean b) {
                return ascii(b.toString());
            }
            if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
                return ascii(Long.toString(((Number) value).longValue()));
            }
            if (value instanceof Double || value instanceof Float) {
                return number(((Number) value).doubleValue());
            }
            if (value instanceof double[] doubles) {
                byte[] packed = TransferProcedures.packBytes(doubles);
                if (packed != null) {
                    ascii("{\"$t\":\"f32\",\"v\":\"");
                    raw(Base64.getEncoder().encode(packed));
                    ascii("\"}");
                    return true;
                }
                return array(doubles.length, i -> number(doubles[i]));
            }
            if (value instanceof String[] strings) {
                return array(strings.length, i -> string(strings[i]));
            }
            if (value instanceof long[] longs) {
                return array(longs.length, i -> ascii(Long.toString(longs[i])));
            }
            if (value instanceof boolean[] booleans) {
                return array(booleans.length, i -> ascii(Boolean.toString(booleans[i])));
            }
            return false;  // temporal values, points, byte and char arrays, other number arrays
        }

        /** A JSON array of `n` items, each written by `item` (false: the item has no JSON form). */
        private boolean array(int n, IntPredicate item) {
            put('[');
            for (int i = 0; i < n; i++) {
                if (i > 0) {
                    put(',');
                }
                if (!item.test(i)) {
                    return false;
                }
            }
            put(']');
            return true;
        }

        private boolean number(double value) {
            if (!Double.isFinite(value)) {
                return false;
            }
            ascii(Double.toString(value));  // a text that reads back as exactly this double
            return true;
        }

        /** The JSON string of `value` in UTF-8; false for null or a lone surrogate (no UTF-8 form). */
        private boolean string(String value) {
            if (value == null) {
                return false;
            }
            room(value.length() * 3 + 2);
            out[length++] = '"';
            for (int i = 0; i < value.length(); i++) {
                char c = value.charAt(i);
                if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
                    out[length++] = (byte) c;
                } else if (c == '"' || c == '\\') {
                    room(2);
                    out[length++] = '\\';
                    out[length++] = (byte) c;
                } else if (c < 0x20) {
                    room(6);
                    out[length++] = '\\';
                    out[length++] = 'u';
                    out[length++] = '0';
                    out[length++] = '0';
                    out[length++] = HEX[c >> 4];
                    out[length++] = HEX[c & 0xf];
                } else if (c < 0x800) {
                    out[length++] = (byte) (0xc0 | (c >> 6));
                    out[length++] = (byte) (0x80 | (c & 0x3f));
                } else if (!Character.isSurrogate(c)) {
                    out[length++] = (byte) (0xe0 | (c >> 12));
                    out[length++] = (byte) (0x80 | ((c >> 6) & 0x3f));
                    out[length++] = (byte) (0x80 | (c & 0x3f));
                } else if (Character.isHighSurrogate(c) && i + 1 < value.length()
                        && Character.isLowSurrogate(value.charAt(i + 1))) {
                    int code = Character.toCodePoint(c, value.charAt(++i));
                    out[length++] = (byte) (0xf0 | (code >> 18));
                    out[length++] = (byte) (0x80 | ((code >> 12) & 0x3f));
                    out[length++] = (byte) (0x80 | ((code >> 6) & 0x3f));
                    out[length++] = (byte) (0x80 | (code & 0x3f));
                } else {
                    return false;
                }
            }
            put('"');
            return true;
        }
    }
}
