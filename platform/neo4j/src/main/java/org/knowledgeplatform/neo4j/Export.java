package org.knowledgeplatform.neo4j;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.function.IntPredicate;

import org.neo4j.graphdb.Direction;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.NotFoundException;
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
    private final int size;

    // the nodes written, in order: internal id, `id` property, label; and the position of each
    private final List<Long> written = new ArrayList<>();
    private final List<Object> writtenIds = new ArrayList<>();
    private final List<String> writtenLabels = new ArrayList<>();
    private final Map<Long, Integer> position = new HashMap<>();

    private String member = NODES;
    private int labelIndex = -1;
    private String label;
    private ResourceIterator<Node> found;
    private int cursor;  // the next written node whose relationships are read

    Export(Transaction tx, String projectId, List<String> labels, int size) {
        this.tx = tx;
        this.projectId = projectId;
        this.labels = List.copyOf(labels);
        this.size = size;
    }

    /** Moves to the next label until one has a node left, then to the relationships. */
    private boolean advance() {
        while (NODES.equals(member) && (found == null || !found.hasNext())) {
            close();
            labelIndex++;
            if (labelIndex >= labels.size()) {
                member = RELATIONSHIPS;
                break;
            }
            label = labels.get(labelIndex);
            found = tx.findNodes(Label.label(label), TransferProcedures.PROJECT_ID, projectId);
        }
        return NODES.equals(member) || cursor < written.size();
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
        Page page = new Page();
        if (NODES.equals(member)) {
            while (page.seen < size && found.hasNext()) {
                node(found.next(), page);
            }
        } else {
            while (page.seen < size && cursor < written.size()) {
                relationships(cursor++, page);
            }
        }
        return new TransferProcedures.ExportPage(
                member, page.json.bytes(), page.lines, page.counts, page.rows, page.skipped);
    }

    /** What one record gathers. */
    private static final class Page {
        final Json json = new Json();
        final Map<String, Long> counts = new LinkedHashMap<>();
        final List<Map<String, Object>> rows = new ArrayList<>();
        long lines;
        long skipped;
        int seen;
    }

    @SuppressWarnings({"deprecation", "removal"})  // internal ids: stable within this transaction
    private void node(Node node, Page page) {
        Map<String, Object> props = node.getAllProperties();
        if (position.putIfAbsent(node.getId(), written.size()) == null) {
            written.add(node.getId());
            writtenIds.add(props.get(TransferProcedures.ID));
            writtenLabels.add(label);
        }
        if (page.json.node(label, props)) {
            page.lines++;
        } else {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("label", label);
            row.put("props", TransferProcedures.packed(props));
            page.rows.add(row);
        }
        page.counts.merge(label, 1L, Long::sum);
        page.seen++;
    }

    /** The relationships leaving the `index`th node written, to nodes written; one to a node of the
     * project that was not written (a label no app owns, or created since) is skipped. */
    @SuppressWarnings({"deprecation", "removal"})
    private void relationships(int index, Page page) {
        Node start;
        try {
            start = tx.getNodeById(written.get(index));
        } catch (NotFoundException gone) {  // deleted since it was written: its relationships go too
            return;
        }
        Object startId = writtenIds.get(index);
        String startLabel = writtenLabels.get(index);
        for (Relationship relationship : start.getRelationships(Direction.OUTGOING)) {
            Integer end = position.get(relationship.getEndNodeId());
            if (end == null) {
                Object owner = relationship.getEndNode().getProperty(TransferProcedures.PROJECT_ID, null);
                page.skipped += projectId.equals(owner) ? 1 : 0;
                continue;
            }
            String type = relationship.getType().name();
            Object endId = writtenIds.get(end);
            String endLabel = writtenLabels.get(end);
            Map<String, Object> props = relationship.getAllProperties();
            if (page.json.relationship(type, startLabel, startId, endLabel, endId, props)) {
                page.lines++;
            } else {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("type", type);
                row.put("start_label", startLabel);
                row.put("start", startId);
                row.put("end_label", endLabel);
                row.put("end", endId);
                row.put("props", TransferProcedures.packed(props));
                page.rows.add(row);
            }
            page.counts.merge(type, 1L, Long::sum);
            page.seen++;
        }
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

        boolean relationship(String type, String startLabel, Object start, String endLabel, Object end,
                Map<String, Object> props) {
            int mark = length;
            ascii("{\"type\":");
            string(type);
            ascii(",\"start_label\":");
            string(startLabel);
            ascii(",\"start\":");
            boolean written = value(start);
            ascii(",\"end_label\":");
            string(endLabel);
            ascii(",\"end\":");
            written = written && value(end);
            ascii(",\"props\":");
            return end(mark, written && map(props));
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
