"""Free `metadata` on memory messages (issue 34, item 5), on the real stack: stored as prefixed
properties, read back exactly by search (every mode), list and get, filtered on in every mode, refused
when malformed (nothing written), kept by a duplicate store, scrubbed by anonymisation, never a way
across a tenant's or a user's boundary."""

from __future__ import annotations

from typing import Any

import pytest

from core import graph
from core.models import Project
from memory import cypher
from memory.nodes import Memory
from tests.conftest import make_tenant
from tests.curation.helpers import carriers
from tests.memory.helpers import memory_nodes, msearch, store

pytestmark = pytest.mark.django_db

MODES = ["vector", "fulltext", "hybrid", "recency"]

# every kind of value, and keys named like the message's own properties (stored apart from them)
RICH = {
    "channel": "email",
    "priority": 3,
    "weight": 4.5,
    "urgent": True,
    "resolved": False,
    "tags": ["billing", "refund"],
    "none_yet": [],
    "note": "Olá, ünïcödé ✓",
    "text": "not the text",
    "role": "not the role",
    "id": "not the id",
    "metadata_keys": "not the key list",
}


def _items(
    client: Any, pid: str, mode: str, user_id: str = "ana", scope_app: str | None = None, **body: Any
) -> list[dict[str, Any]]:
    query = "" if mode == "recency" else "harbour ferry"
    scope = {"user_id": user_id, **({"application_id": scope_app} if scope_app else {})}
    response = msearch(client, pid, query, scope, mode=mode, min_score=0, top_k=50, **body)
    assert response.status_code == 200, response.content
    return [item for item in response.json()["items"] if item["level"] == "message"]


def _exact(value: Any) -> Any:
    """A JSON value with its types spelt out: 3 and 3.0 or True and 1 compare equal in Python."""
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize("mode", MODES)
def test_metadata_round_trips_through_search_list_and_get(mode: str) -> None:
    tenant = make_tenant(f"mem-meta-trip-{mode}")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    response = store(
        client,
        pid,
        [
            {
                "role": "user",
                "text": "The harbour ferry leaves at nine.",
                "message_id": "a",
                "metadata": RICH,
            },
            {"role": "assistant", "text": "The harbour ferry is late today.", "author_name": "Bot"},
            {"role": "user", "text": "No harbour ferry on Sunday.", "metadata": None},
        ],
        user_id="ana",
    )
    assert response.status_code == 201, response.content
    rich, plain, null = (s["id"] for s in response.json()["stored"])

    found = {item["id"]: item for item in _items(client, pid, mode)}
    assert set(found) == {rich, plain, null}
    assert _exact(found[rich]["fields"]) == _exact(RICH)
    assert list(found[rich]["fields"]) == list(RICH)  # in the order given
    assert found[plain]["fields"] == {} and found[null]["fields"] == {}
    # the platform's own metadata and the message's properties are untouched by same-named keys
    assert found[rich]["metadata"] == {"message_id": "a", "seq": 1}
    assert found[rich]["text"] == "The harbour ferry leaves at nine." and found[rich]["role"] == "user"
    assert found[plain]["metadata"] == {"author_name": "Bot", "seq": 2}

    listed = {
        item["id"]: item
        for item in client.get(f"/api/v1/projects/{pid}/memories?user_id=ana").json()["items"]
    }
    assert _exact(listed[rich]["fields"]) == _exact(RICH) and listed[plain]["fields"] == {}
    assert "metadata_pairs" not in listed[rich]
    got = client.get(f"/api/v1/projects/{pid}/memories/{rich}").json()
    assert (
        _exact(got["fields"]) == _exact(RICH) and got["id"] == rich and got["text"].startswith("The harbour")
    )
    assert client.get(f"/api/v1/projects/{pid}/memories/{plain}").json()["fields"] == {}


def test_metadata_keys_never_collide_with_the_messages_own_properties() -> None:
    own = set(Memory.defined_properties())
    assert {"text", "role", "message_id", cypher.METADATA_KEYS} <= own
    assert not [name for name in own if name.startswith(cypher.METADATA_PREFIX)]
    tenant = make_tenant("mem-meta-props")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(client, pid, [{"role": "user", "text": "The harbour ferry.", "metadata": RICH}], user_id="ana")
    (row,) = graph.read("MATCH (m:Memory {project_id: $p}) RETURN keys(m) AS keys, m AS m", p=pid)
    prefixed = {k for k in row["keys"] if k.startswith(cypher.METADATA_PREFIX)}
    # every property with the prefix is a metadata key's (an empty list too), none of the message's own
    assert prefixed == {cypher.METADATA_PREFIX + k for k in RICH}
    assert row["m"]["text"] == "The harbour ferry." and row["m"]["role"] == "user"
    assert row["m"]["metadata_keys"] == list(RICH)


MESSAGES = [
    # role, author, time, text, metadata
    ("user", "Ana", "2023-05-01T10:00:00Z", "Is the harbour ferry running?",
     {"channel": "email", "priority": 1, "urgent": True, "tags": ["billing", "refund"]}),
    ("assistant", "Bot", "2023-05-02T10:00:00Z", "The harbour ferry runs hourly.",
     {"channel": "chat", "priority": 2, "urgent": False, "tags": ["billing"]}),
    ("user", "Ana", "2023-06-01T10:00:00Z", "Thanks, the harbour ferry it is.",
     {"channel": "email", "priority": 2.0, "urgent": False, "tags": []}),
    ("user", "Ana", "2023-06-02T10:00:00Z", "Harbour ferry tickets are sold out.", None),
]  # fmt: skip


def _filtered_setup(name: str) -> tuple[Any, str, list[str]]:
    tenant = make_tenant(name)
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    messages = [
        {"role": r, "author_name": a, "timestamp": t, "text": x, **({"metadata": m} if m else {})}
        for r, a, t, x, m in MESSAGES
    ]
    response = store(client, pid, messages, user_id="ana")
    assert response.status_code == 201, response.content
    # another user's message matching every filter below: never returned to ana
    store(
        client,
        pid,
        [{"role": "user", "text": "The harbour ferry.", "metadata": MESSAGES[0][4]}],
        user_id="eve",
    )
    return client, pid, [s["id"] for s in response.json()["stored"]]


def _ids(client: Any, pid: str, mode: str, **body: Any) -> list[str]:
    return sorted(item["id"] for item in _items(client, pid, mode, **body))


@pytest.mark.parametrize("mode", MODES)
def test_metadata_filters_in_every_mode(mode: str) -> None:
    client, pid, (first, reply, third, bare) = _filtered_setup(f"mem-meta-filter-{mode}")
    assert _ids(client, pid, mode) == sorted([first, reply, third, bare])
    assert _ids(client, pid, mode, metadata={}) == sorted([first, reply, third, bare])

    def ids(**metadata: Any) -> list[str]:
        return _ids(client, pid, mode, metadata=metadata)

    assert ids(channel="email") == sorted([first, third])
    assert ids(channel="sms") == []
    assert ids(priority=1) == [first]
    assert ids(priority=2) == sorted([reply, third])  # numbers compare as numbers: 2 is 2.0
    assert ids(priority=2.0) == sorted([reply, third])
    assert ids(urgent=True) == [first]
    assert ids(urgent=False) == sorted([reply, third])  # a message without the key is not false
    assert ids(tags="billing") == sorted([first, reply])  # a list holds the value
    assert ids(tags="refund") == [first]
    assert ids(channel="email", urgent=False) == [third]  # every key
    assert ids(channel="email", tags="billing") == [first]
    # types are not coerced: "2" is no number, 1 no boolean, a list item no prefix of another
    assert ids(priority="2") == [] and ids(urgent=1) == [] and ids(tags="bill") == []
    assert ids(missing="x") == []
    # a key named like the message's own property filters the metadata, never the property
    assert ids(role="user") == [] and ids(text="Is the harbour ferry running?") == []


def test_metadata_filters_combine_with_time_role_and_author_filters() -> None:
    client, pid, (first, reply, third, bare) = _filtered_setup("mem-meta-combined")
    for mode in ("hybrid", "recency"):
        assert _ids(client, pid, mode, metadata={"tags": "billing"}, roles=["assistant"]) == [reply]
        assert _ids(client, pid, mode, metadata={"channel": "email"}, since="2023-06-01") == [third]
        assert _ids(client, pid, mode, metadata={"channel": "email"}, when="May 2023") == [first]
        assert _ids(client, pid, mode, metadata={"priority": 2}, author="Ana") == [third]
        assert _ids(client, pid, mode, metadata={"urgent": True}, until="2023-05-01T09:00:00Z") == []


def test_a_metadata_filter_never_crosses_a_project_or_a_user() -> None:
    mine, theirs = make_tenant("mem-meta-tenant-a"), make_tenant("mem-meta-tenant-b")
    a, pa = mine.client(mine.write_key), mine.project.id
    b, pb = theirs.client(theirs.write_key), theirs.project.id
    tagged = {
        "role": "user",
        "text": "The harbour ferry ticket.",
        "metadata": {"account": "acme", "vip": True},
    }
    ana = store(a, pa, [tagged], user_id="ana").json()["stored"][0]["id"]
    store(a, pa, [tagged], user_id="bo")  # same project, another user
    store(a, pa, [tagged], user_id="ana", application_id="other-app")  # same user, another application
    store(b, pb, [tagged], user_id="ana")  # another project, same user id
    for mode in MODES:
        found = _items(a, pa, mode, metadata={"account": "acme", "vip": True})
        # ana's two messages (no application, and other-app's: a scope key not given is not constrained)
        assert len(found) == 2 and {i["scope"]["user_id"] for i in found} == {"ana"}
        assert [i["id"] for i in found if i["scope"]["application_id"] is None] == [ana]
        scoped = _items(a, pa, mode, metadata={"account": "acme"}, scope_app="other-app")
        assert len(scoped) == 1 and scoped[0]["id"] != ana
    # project B's key sees only project B's message, whatever it filters on
    other = _items(b, pb, "recency", metadata={"account": "acme"})
    assert len(other) == 1 and other[0]["id"] != ana
    assert b.get(f"/api/v1/projects/{pb}/memories/{ana}").status_code == 404


def test_a_repeated_message_id_keeps_the_first_metadata() -> None:
    tenant = make_tenant("mem-meta-duplicate")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    first = store(
        client,
        pid,
        [{"role": "user", "text": "Harbour ferry?", "message_id": "m1", "metadata": {"v": 1}}],
        user_id="ana",
    ).json()["stored"][0]
    again = store(
        client,
        pid,
        [{"role": "user", "text": "Harbour ferry?", "message_id": "m1", "metadata": {"v": 2, "new": "x"}}],
        user_id="ana",
    ).json()["stored"][0]
    assert again["duplicate"] is True and again["id"] == first["id"]
    assert client.get(f"/api/v1/projects/{pid}/memories/{first['id']}").json()["fields"] == {"v": 1}
    assert _ids(client, pid, "recency", metadata={"v": 2}) == []
    assert _ids(client, pid, "recency", metadata={"new": "x"}) == []


def test_anonymising_drops_string_metadata_and_keeps_numbers_and_booleans() -> None:
    from curation.services import conversation_anonymise_now

    tenant = make_tenant("mem-meta-anonymise")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    metadata = {"customer": "Rita Moreno", "contact": ["rita@example.com"], "score": 7, "vip": True}
    body = store(
        client,
        pid,
        [
            {
                "role": "user",
                "text": "I am called Rita Moreno, the harbour ferry was late.",
                "metadata": metadata,
            },
            {"role": "assistant", "text": "Sorry about the harbour ferry.", "metadata": {"agent": "Bot"}},
        ],
        user_id="rita",
    ).json()
    cid, (rita, reply) = body["conversation_id"], (s["id"] for s in body["stored"])
    assert carriers(pid, "rita@example.com")
    conversation_anonymise_now(project_id=pid, conversation_id=cid, actor="test")
    assert carriers(pid, "rita@example.com") == [] and carriers(pid, "Rita Moreno") == []
    got = client.get(f"/api/v1/projects/{pid}/memories/{rita}").json()
    assert _exact(got["fields"]) == _exact({"score": 7, "vip": True})
    assert client.get(f"/api/v1/projects/{pid}/memories/{reply}").json()["fields"] == {}
    (row,) = graph.read(
        "MATCH (m:Memory {id: $id}) RETURN keys(m) AS keys, m.metadata_keys AS listed", id=rita
    )
    assert row["listed"] == ["score", "vip"]
    assert sorted(k for k in row["keys"] if k.startswith(cypher.METADATA_PREFIX)) == [
        "meta_score",
        "meta_vip",
    ]
    assert _ids(client, pid, "recency", user_id="rita", metadata={"vip": True}) == [rita]
    assert _ids(client, pid, "recency", user_id="rita", metadata={"customer": "Rita Moreno"}) == []


def test_redaction_at_ingest_redacts_metadata_strings_as_the_text() -> None:
    tenant = make_tenant("mem-meta-redact")
    Project.objects.filter(pk=tenant.project.id).update(redact_pii_at_ingest=True)
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    metadata = {"contact": "write to rita@example.com", "cc": ["ops@example.com", "desk"], "n": 2}
    memory_id = store(
        client, pid, [{"role": "user", "text": "The harbour ferry.", "metadata": metadata}], user_id="rita"
    ).json()["stored"][0]["id"]
    assert carriers(pid, "@example.com") == []
    fields = client.get(f"/api/v1/projects/{pid}/memories/{memory_id}").json()["fields"]
    assert fields == {"contact": "write to [EMAIL]", "cc": ["[EMAIL]", "desk"], "n": 2}


BAD_METADATA = [
    ({"nested": {"a": 1}}, "nested"),
    ({"gone": None}, "gone"),
    ({"1st": "x"}, "1st"),
    ({"has-dash": "x"}, "has-dash"),
    ({"": "x"}, "''"),
    ({"k" * 65: "x"}, "k" * 65),
    ({f"k{i}": i for i in range(17)}, "at most 16 keys"),
    ({"long": "x" * 1001}, "long"),
    ({"list": ["x" * 1001]}, "list[0]"),
    ({"list": ["a", 1]}, "list[1]"),
    ({"list": [["a"]]}, "list[0]"),
    ({"list": ["a"] * 33}, "at most 32"),
    ({"big": 2**63}, "big"),
    ({"nul": "a\x00b"}, "NUL"),
    (["not", "an", "object"], "JSON object"),
    ("channel=email", "JSON object"),
]


@pytest.mark.parametrize(("metadata", "named"), BAD_METADATA)
def test_malformed_metadata_is_400_naming_the_field_and_writes_nothing(metadata: Any, named: str) -> None:
    tenant = make_tenant("mem-meta-bad")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    messages = [
        {"role": "user", "text": "fine", "metadata": {"ok": 1}},
        {"role": "user", "text": "x", "metadata": metadata},
    ]
    response = store(client, pid, messages, user_id="ana")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    (problem,) = error["details"]["fields"]["messages[1]"]["metadata"]
    assert named in problem, problem
    assert memory_nodes(pid) == 0


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        ({"tags": ["billing"]}, "tags"),  # a filter value is one value; a list holds it
        ({"nested": {"a": 1}}, "nested"),
        ({"gone": None}, "gone"),
        ({"bad key": "x"}, "bad key"),
        ({f"k{i}": i for i in range(17)}, "at most 16 keys"),
        ({"long": "x" * 1001}, "long"),
        ("channel", "JSON object"),
        (None, "null"),
    ],
)
def test_malformed_metadata_filters_are_400_naming_the_field(metadata: Any, named: str) -> None:
    tenant = make_tenant("mem-meta-bad-filter")
    client, pid = tenant.client(tenant.read_key), tenant.project.id
    response = msearch(client, pid, "harbour", {"user_id": "ana"}, metadata=metadata)
    assert response.status_code == 400, response.content
    (problem,) = response.json()["error"]["details"]["fields"]["metadata"]
    assert named in problem, problem
