"""The embedded Neo4j writes an export's lines itself (platform/neo4j TransferProcedures.java,
`kp.transfer.export`) and unpacks an import's float lists (`kp.transfer.unpacked`): the archive is
the one the Cypher reads and orjson make, value for value, of every type a property can hold, and
holds nothing of another project."""

from __future__ import annotations

import gzip
import io
import math
from typing import Any

import pytest

from core import graph
from core.graph import transfer
from core.models import Project
from portability import archive, exporter, importer
from tests.conftest import Tenant
from tests.portability.helpers import float32_vector, member_rows, server_transfer_or_skip

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_graph")]


def _fill(project_id: str, other_id: str) -> None:
    graph.write(
        "CREATE (a:Entity {id: 'e1', project_id: $p, name: 'naïve — 東京 🙂 \"q\" \\\\ \t\n\u0001', "
        "key: '', embedding: $vector, not_single: $doubles, short: [0.5, 0.25], counts: [1, -2, 3], "
        "tags: ['a', 'b\"'], flags: [true, false], flag: true, score: 0.1, big: 1.0e300, tiny: 5e-324, "
        "negative_zero: -0.0, size: 9007199254740993, empty: []}) "
        "CREATE (b:Entity {id: 'e2', project_id: $p, name: 'dated', embedding: $vector2, "
        "seen: datetime('2023-05-08T13:56:00.123456789+02:00'), day: date('2023-05-08'), "
        "local: localdatetime('2023-05-08T13:56:00'), span: duration('P1M2DT3.5S')}) "
        "CREATE (c:Entity {id: 'e3', project_id: $p, name: 'not a number', nan_list: "
        "[x IN range(1, 20) | 0.5] + [0.0 / 0.0], inf: 1.0 / 0.0}) "
        "CREATE (d:Document {id: 'd1', project_id: $p, title: 'doc', created_at: datetime()}) "
        "CREATE (x:Entity {id: 'x1', project_id: $other, name: 'another project', embedding: $vector}) "
        "CREATE (s:Stranger {id: 's1', project_id: $p}) "
        "CREATE (a)-[:RELATED {description: 'next', weight: 1.0, chunk_ids: ['c1', 'c2']}]->(b) "
        "CREATE (a)-[:RELATED {description: 'self', weight: 0.5, chunk_ids: []}]->(a) "
        "CREATE (b)-[:RELATED {vector: $vector, when: date('2024-01-02')}]->(c) "
        "CREATE (d)-[:MENTIONS]->(a) "
        "CREATE (a)-[:RELATED {description: 'across'}]->(x) "
        "CREATE (x)-[:RELATED {description: 'into'}]->(b) "
        "CREATE (a)-[:RELATED {description: 'to a label no app owns'}]->(s)",
        p=project_id,
        other=other_id,
        vector=float32_vector(384),
        vector2=float32_vector(384, 7.0),
        doubles=[i / 10 for i in range(1, 40)],
    )


def _export(tenant: Tenant, server: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], bytes]:
    with monkeypatch.context() as patch:
        if not server:
            patch.setitem(transfer._server_transfer, id(graph.get_driver()), False)
        target = io.BytesIO()
        manifest = exporter.export_ndjson(
            Project.objects.get(pk=tenant.project.id), target, lambda phase, done: None
        )
    return manifest, target.getvalue()


def _canonical(body: bytes) -> tuple[list[Any], list[Any]]:
    def key(row: dict[str, Any]) -> str:
        return repr(sorted(row.items()))

    nodes = sorted(member_rows(body, "nodes.ndjson"), key=lambda row: row["props"]["id"])
    rels = sorted(member_rows(body, "relationships.ndjson"), key=key)
    return nodes, rels


def test_the_server_writes_the_archive_cypher_and_orjson_write(
    tenant_a: Tenant, tenant_b: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_transfer_or_skip()
    _fill(tenant_a.project.id, tenant_b.project.id)
    on_server, body = _export(tenant_a, True, monkeypatch)
    here, plain_body = _export(tenant_a, False, monkeypatch)
    assert on_server["counts"] == here["counts"]
    assert on_server["counts"]["nodes"] == {"Document": 1, "Entity": 3}  # nothing of tenant_b's
    assert on_server["counts"]["relationships"] == {"MENTIONS": 1, "RELATED": 3}
    nodes, rels = _canonical(body)
    assert (nodes, rels) == _canonical(plain_body)
    first = nodes[1]["props"]
    assert first["embedding"]["$t"] == "f32" and first["name"].startswith("naïve — 東京 🙂")
    assert first["size"] == 9007199254740993 and first["tiny"] == 5e-324
    assert math.copysign(1.0, first["negative_zero"]) == -1.0
    assert nodes[2]["props"]["seen"] == {"$t": "datetime", "v": "2023-05-08T13:56:00.123456789+02:00"}
    assert nodes[3]["props"]["nan_list"][-1] is None  # NaN has no JSON form: null on both paths


def test_an_archive_the_server_wrote_imports_to_the_same_values(
    tenant_a: Tenant, tenant_b: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_transfer_or_skip()
    _fill(tenant_a.project.id, tenant_b.project.id)
    # NaN has no JSON form (null), and Neo4j stores no list holding a null: not part of this check
    graph.write("MATCH (n:Entity {id: 'e3'}) DETACH DELETE n")
    _manifest, body = _export(tenant_a, True, monkeypatch)
    read = (
        "MATCH (n:Entity) WHERE n.project_id = $p AND n.id = 'e2' "
        "RETURN n.embedding AS e, n.seen AS seen, n.span AS span"
    )
    before = graph.read(read, p=tenant_a.project.id)
    graph.write("MATCH (n) WHERE n.project_id = $p DETACH DELETE n", p=tenant_a.project.id)
    importer.load(io.BytesIO(body), project_id=tenant_b.project.id, progress=lambda phase, done: None)
    assert graph.read(read, p=tenant_b.project.id) == before
    assert before[0]["e"] == float32_vector(384, 7.0)


def test_an_archive_in_one_gzip_member_reads_the_same(
    tenant_a: Tenant, tenant_b: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive is several gzip members one after another; one written as a single member (by
    `tar czf`, or by this platform before) is read to the same lines."""
    _fill(tenant_a.project.id, tenant_b.project.id)
    _manifest, body = _export(tenant_a, True, monkeypatch)
    single = gzip.compress(gzip.decompress(body))
    assert single != body
    assert list(archive.read(io.BytesIO(single))) == list(archive.read(io.BytesIO(body)))
