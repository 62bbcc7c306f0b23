"""Long float lists (embeddings) travel packed in an archive of schema version 2: the same doubles come
back, lists that are not exactly float32 stay JSON, a damaged packed value is refused, and an
archive of schema version 1 (every list JSON) still imports to the same stored values."""

from __future__ import annotations

import base64
import io
import math
import struct

import pytest
from django.conf import settings

from core import graph
from core.errors import InvalidInput
from core.graph import transfer
from core.graph.transfer import PACKED_MIN_LENGTH, decode_props, pack_props
from portability import importer
from tests.conftest import Tenant
from tests.portability.helpers import float32_vector, hand_archive, memory_rows, server_transfer_or_skip


def test_float32_lists_are_packed_and_come_back_exactly() -> None:
    vector = float32_vector(384)
    props = {"id": "c1", "text": "t", "embedding": vector, "weights": [0.5, 0.25]}
    packed = pack_props(props)
    assert packed["embedding"]["$t"] == "f32"
    assert base64.b64decode(packed["embedding"]["v"]) == struct.pack(f"<{len(vector)}f", *vector)
    assert packed["weights"] == [0.5, 0.25] and packed["text"] == "t"  # short lists stay JSON
    assert props["embedding"] is vector  # the caller's map is not changed
    assert decode_props(packed) == props


def test_lists_that_are_not_float32_stay_json() -> None:
    cases = [
        [i / 10 for i in range(1, 40)],  # 0.1 has no exact float32
        [0.5] * 20 + [math.nan],
        [1e300] * 20,
        list(range(40)),
        ["a"] * 20,
        [0.5] * (PACKED_MIN_LENGTH - 1),
    ]
    for value in cases:
        assert pack_props({"v": value})["v"] is value


def test_a_damaged_packed_value_is_invalid_input() -> None:
    for raw in ("not base64 at all!", base64.b64encode(b"abcdef").decode()):
        for keep_packed in (False, True):  # kept packed for the server to unpack: checked all the same
            with pytest.raises(InvalidInput):
                decode_props({"v": {"$t": "f32", "v": raw}}, keep_packed=keep_packed)


def _through(server: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Import through the server's `kp.transfer.unpacked` or (an external server's way) without it."""
    if server:
        server_transfer_or_skip()
    else:
        monkeypatch.setitem(transfer._server_transfer, id(graph.get_driver()), False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_graph")
@pytest.mark.parametrize("server", [True, False], ids=["unpacked-on-the-server", "unpacked-here"])
def test_an_import_with_a_damaged_embedding_writes_nothing(
    tenant_a: Tenant, server: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _through(server, monkeypatch)
    rows = memory_rows(3)
    for row in rows:
        row["props"]["embedding"] = pack_props({"e": float32_vector(settings.EMBEDDINGS_DIMENSIONS)})["e"]
    rows[2]["props"]["embedding"]["v"] = "not base64 at all!"
    count = "MATCH (n) WHERE n.project_id = $p RETURN labels(n) AS l, count(n) AS n ORDER BY n"
    before = graph.read(count, p=tenant_a.project.id)
    with pytest.raises(InvalidInput, match="not base64"):
        importer.load(
            io.BytesIO(hand_archive(rows)), project_id=tenant_a.project.id, progress=lambda *a: None
        )
    assert graph.read(count, p=tenant_a.project.id) == before
    assert not any("Memory" in row["l"] for row in before)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_graph")
@pytest.mark.parametrize("server", [True, False], ids=["unpacked-on-the-server", "unpacked-here"])
def test_both_schema_versions_store_the_same_doubles(
    tenant_a: Tenant, tenant_b: Tenant, server: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _through(server, monkeypatch)
    vector = float32_vector(settings.EMBEDDINGS_DIMENSIONS)
    plain, packed = memory_rows(1), memory_rows(1)
    plain[0]["props"]["embedding"] = vector
    packed[0]["props"]["embedding"] = pack_props({"e": vector})["e"]
    for tenant, rows, version in ((tenant_a, plain, 1), (tenant_b, packed, 2)):
        body = hand_archive(rows, schema_version=version)
        importer.load(io.BytesIO(body), project_id=tenant.project.id, progress=lambda phase, done: None)
        stored = graph.read(
            "MATCH (m:Memory) WHERE m.project_id = $p RETURN m.embedding AS e", p=tenant.project.id
        )
        assert stored == [{"e": vector}]
