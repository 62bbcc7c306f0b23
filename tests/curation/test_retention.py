"""Retention policies: validation, dry-run preview, runs that anonymise, summarise or delete, expired
conversations, orphaned entities; resumable runs audited once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth.models import User
from django.test import RequestFactory

from core import graph
from core.embeddings import get_embedder
from curation import services
from curation.models import AuditEntry, PolicyRun, RetentionPolicy
from memory import services as memory_services
from memory.tasks import memory_process
from memory.text import row_line, search_text
from tests.conftest import make_tenant
from tests.curation.helpers import carriers, privacy, snapshot
from tests.memory.helpers import assistant, count, msearch, store, user

pytestmark = pytest.mark.django_db

OLD = (datetime.now(UTC) - timedelta(days=40)).isoformat()
OLDER = (datetime.now(UTC) - timedelta(days=41)).isoformat()


def _policy(project_id: str | None, kind: str, action: str, age_days: int | None) -> RetentionPolicy:
    policy = RetentionPolicy(
        name=f"{kind} {action}", project_id=project_id, kind=kind, action=action, age_days=age_days
    )
    policy.full_clean()
    policy.save()
    return policy


def _run(policy: RetentionPolicy, project_id: str) -> PolicyRun:
    run_ids = services.policy_runs_queue(policy_id=policy.pk, actor="user:curator")
    (run,) = PolicyRun.objects.filter(pk__in=run_ids, project_id=project_id)
    return services.policy_run_execute(run_id=run.pk)


def _seed(client, pid: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    old = store(
        client,
        pid,
        [
            user("My name is Ana Souza and my mail is ana@example.com.", timestamp=OLDER),
            user("I love Lisbon tram rides.", timestamp=OLDER),
            assistant("Noted, Ana Souza: trams in Lisbon.", timestamp=OLD),
        ],
        user_id="ana",
        thread_id="ana-1",
    ).json()
    memory_process.apply(args=(old["job_id"],))
    memory_services.conversation_summarize(project_id=pid, conversation_id=old["conversation_id"], force=True)
    fresh = store(
        client, pid, [user("Ana Souza booked a fresh table today.")], user_id="ana", thread_id="ana-2"
    ).json()
    return {"old": old["conversation_id"], "fresh": fresh["conversation_id"]}


@pytest.mark.parametrize(
    ("kind", "action", "age_days", "field"),
    [
        ("messages", "anonymise", -3, "age_days"),
        ("messages", "anonymise", 0, "age_days"),
        ("messages", "anonymise", None, "age_days"),
        ("no_such_kind", "delete", 10, "kind"),
        ("orphaned_entities", "anonymise", 180, "action"),
        ("expired_conversations", "delete", 30, "age_days"),
        ("messages", "shred", 30, "action"),
    ],
)
def test_the_policy_form_rejects_bad_policies(
    kind: str, action: str, age_days: int | None, field: str
) -> None:
    admin = site._registry[RetentionPolicy]
    request = RequestFactory().post("/")
    request.user = User(is_superuser=True, is_staff=True)
    form_class = admin.get_form(request)
    form = form_class(
        data={"name": "bad", "kind": kind, "action": action, "age_days": age_days or "", "enabled": "on"}
    )
    if age_days is None:
        form = form_class(data={"name": "bad", "kind": kind, "action": action, "enabled": "on"})
    assert not form.is_valid()
    assert field in form.errors
    assert not RetentionPolicy.objects.filter(name="bad").exists()


def test_seed_003_pruning_rules_are_default_policies() -> None:
    defaults = {(p.kind, p.age_days, p.action) for p in RetentionPolicy.objects.filter(project=None)}
    assert ("messages", 90, "summarise_then_delete") in defaults
    assert ("orphaned_entities", 180, "delete") in defaults
    assert ("expired_conversations", None, "delete") in defaults


def test_preview_counts_and_writes_nothing_then_anonymise_purges_every_copy() -> None:
    tenant = make_tenant("retention-anon")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    ids = _seed(client, pid)
    assert count("Fact", pid) + count("Preference", pid) > 0 and count("ConversationSummary", pid) == 1
    policy = _policy(pid, "messages", "anonymise", 30)
    before = snapshot(pid)
    (preview,) = services.policy_preview(policy_id=policy.pk, actor="user:curator")
    assert preview["summary"] == "this will anonymise 3 messages in 1 conversations"
    assert snapshot(pid) == before
    assert AuditEntry.objects.filter(project_id=pid, action="policy_preview").count() == 1

    original = graph.read(
        "MATCH (m:Memory {conversation_id: $c}) RETURN m.id AS id, m.embedding AS e ORDER BY m.seq",
        c=ids["old"],
    )
    run = _run(policy, pid)
    assert run.status == "succeeded"
    assert run.counts["messages"] == 3 and run.counts["person"] >= 2 and run.counts["email"] == 1
    texts = graph.read(
        "MATCH (m:Memory {conversation_id: $c}) RETURN m.text AS t ORDER BY m.seq", c=ids["old"]
    )
    assert [r["t"] for r in texts] == [
        "My name is [PERSON] and my mail is [EMAIL].",
        "I love Lisbon tram rides.",
        "Noted, [PERSON]: trams in Lisbon.",
    ]
    after = {
        r["id"]: r["e"]
        for r in graph.read(
            "MATCH (m:Memory {conversation_id: $c}) RETURN m.id AS id, m.embedding AS e", c=ids["old"]
        )
    }
    first = original[0]["id"]
    assert after[first] != original[0]["e"]
    # embedded from its line (memory.text: speaker, day, text), and indexed by its new words only
    (message,) = graph.read(
        "MATCH (m:Memory {id: $id}) RETURN m {.text, .role, .author_name, .timestamp} AS m, m.search_text AS s",
        id=first,
    )
    expected = get_embedder().embed_one(row_line(message["m"]))
    assert after[first] == pytest.approx(expected, abs=1e-5)
    assert message["s"] == search_text(**message["m"])
    indexed = graph.read("MATCH (m:Memory {conversation_id: $c}) RETURN m.search_text AS s", c=ids["old"])
    assert not [r for r in indexed if "souza" in r["s"] or "ana" in r["s"].split()]
    # the summary and the facts held the words: gone; the fresh conversation is untouched
    assert count("ConversationSummary", pid) == 0
    assert not [c for c in carriers(pid, "ana@example.com")]
    assert {c["label"] for c in carriers(pid, "Ana Souza")} == {"Memory"}
    fresh = graph.read("MATCH (m:Memory {conversation_id: $c}) RETURN m.text AS t", c=ids["fresh"])
    assert fresh == [{"t": "Ana Souza booked a fresh table today."}]
    hits = msearch(client, pid, "Ana Souza", {"user_id": "ana"}, mode="fulltext").json()["items"]
    assert all("fresh table" in h["text"] for h in hits)
    # one audit entry for the run, with counts and no content
    (entry,) = AuditEntry.objects.filter(project_id=pid, action="policy_run")
    assert entry.counts["messages"] == 3 and "Ana" not in str(entry.details) + str(entry.counts)
    # the run is finished: running it again does nothing and audits nothing
    services.policy_run_execute(run_id=run.pk)
    assert AuditEntry.objects.filter(project_id=pid, action="policy_run").count() == 1


def test_delete_and_summarise_then_delete() -> None:
    tenant = make_tenant("retention-delete")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    ids = _seed(client, pid)
    run = _run(_policy(pid, "messages", "delete", 30), pid)
    assert run.counts["messages"] == 3
    assert carriers(pid, "ana@example.com") == []
    assert graph.read("MATCH (m:Memory {project_id: $p}) RETURN m.conversation_id AS c", p=pid) == [
        {"c": ids["fresh"]}
    ]

    other = make_tenant("retention-fold")
    ids = _seed(other.client(other.write_key), other.project.id)
    run = _run(_policy(other.project.id, "messages", "summarise_then_delete", 30), other.project.id)
    assert run.counts["messages"] == 3 and run.counts["summaries"] >= 1
    assert count("Memory", other.project.id) == 1
    assert graph.read(
        "MATCH (s:ConversationSummary {conversation_id: $c}) RETURN s.consolidated AS c", c=ids["old"]
    ) == [{"c": True}]


def test_expired_conversations_are_deleted_or_anonymised_by_their_settings() -> None:
    tenant = make_tenant("retention-expired")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    gone = store(client, pid, [user("Delete me: bruno@example.com", timestamp=OLD)], user_id="bruno").json()
    kept = store(
        client, pid, [user("Keep me anonymous: carla@example.com", timestamp=OLD)], user_id="carla"
    ).json()
    live = store(client, pid, [user("Still fresh: dora@example.com")], user_id="dora").json()
    privacy(client, pid, gone["conversation_id"], accessibility="private", retention_days=1)
    privacy(client, pid, kept["conversation_id"], retention_days=1, anonymize=True)
    privacy(client, pid, live["conversation_id"], retention_days=1)
    policy = _policy(pid, "expired_conversations", "delete", None)
    (preview,) = services.policy_preview(policy_id=policy.pk, project_id=pid, actor="user:curator")
    assert (
        preview["summary"]
        == "this will delete 1 messages in 1 conversations and anonymise 1 messages in 1 conversations"
    )
    run = _run(policy, pid)
    assert run.counts["deleted_conversations"] == 1 and run.counts["anonymised_conversations"] == 1
    assert carriers(pid, "bruno@example.com") == [] and carriers(pid, "carla@example.com") == []
    assert graph.read("MATCH (c:Conversation {id: $c}) RETURN c", c=gone["conversation_id"]) == []
    texts = {r["t"] for r in graph.read("MATCH (m:Memory {project_id: $p}) RETURN m.text AS t", p=pid)}
    assert texts == {"Keep me anonymous: [EMAIL]", "Still fresh: dora@example.com"}
    # an anonymised conversation is not picked again
    (again,) = services.policy_preview(policy_id=policy.pk, project_id=pid, actor="user:curator")
    assert again["summary"] == "nothing has expired"


def test_orphaned_entities_are_stamped_then_pruned_after_the_age() -> None:
    tenant = make_tenant("retention-entities")
    pid = tenant.project.id
    graph.write(
        "UNWIND range(1, 3) AS i CREATE (:Entity {id: $p + '-e' + i, project_id: $p, name: 'orphan ' + i, key: 'o' + i})",
        p=pid,
    )
    graph.write(
        "CREATE (:Document {id: $p + '-d', project_id: $p})-[:HAS_CHUNK]->(c:Chunk {id: $p + '-c', project_id: $p})"
        "-[:HAS_ENTITY]->(:Entity {id: $p + '-kept', project_id: $p, name: 'kept', key: 'k'})",
        p=pid,
    )
    policy = _policy(pid, "orphaned_entities", "delete", 180)
    first = _run(policy, pid)
    assert first.counts.get("newly_orphaned") == 3 and first.counts.get("entities", 0) == 0
    assert count("Entity", pid) == 4
    # 181 days later (the stamps are moved back), the orphans go and the referenced entity stays
    old = (datetime.now(UTC) - timedelta(days=181)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    graph.write(
        "MATCH (e:Entity {project_id: $p}) WHERE e.orphaned_at IS NOT NULL SET e.orphaned_at = $o",
        p=pid,
        o=old,
    )
    second = _run(policy, pid)
    assert second.counts["entities"] == 3
    assert graph.read("MATCH (e:Entity {project_id: $p}) RETURN e.name AS n", p=pid) == [{"n": "kept"}]


def test_a_run_interrupted_after_some_batches_resumes_without_redoing_them(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETENTION_BATCH = 2
    tenant = make_tenant("retention-resume")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    store(
        client, pid, [user(f"note {i} for eve@example.com", timestamp=OLD) for i in range(5)], user_id="eve"
    )
    policy = _policy(pid, "messages", "anonymise", 30)
    run = PolicyRun.objects.get(pk=services.policy_runs_queue(policy_id=policy.pk, actor="user:curator")[0])
    # the first batch ran, then the worker died: status running, cursor and counts recorded
    step = services._messages_step(run, "anonymise")
    PolicyRun.objects.filter(pk=run.pk).update(
        status="running", cursor=step.cursor, counts=dict(step.counts), attempts=1
    )
    # data written during the run (newer than its cutoff) is left for the next run
    store(client, pid, [user("written during the run: eve@example.com")], user_id="eve")
    finished = services.policy_run_execute(run_id=run.pk)
    assert finished.status == "succeeded" and finished.attempts == 2
    assert finished.counts["messages"] == 5  # 2 before the crash + 3 after, none twice
    assert carriers(pid, "eve@example.com") == [
        {
            "label": "Memory",
            "id": graph.read(
                "MATCH (m:Memory {project_id: $p}) WHERE m.anonymized IS NULL RETURN m.id AS id", p=pid
            )[0]["id"],
        }
    ]
    assert AuditEntry.objects.filter(project_id=pid, action="policy_run").count() == 1


def test_the_retention_run_command_previews_and_runs() -> None:
    import io
    import json

    from django.core.management import call_command

    tenant = make_tenant("retention-command")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _seed(client, pid)
    policy = _policy(pid, "messages", "delete", 30)
    out = io.StringIO()
    call_command("retention_run", policy=policy.pk, dry_run=True, stdout=out)
    assert json.loads(out.getvalue())[0]["messages"] == 3
    assert count("Memory", pid) == 4
    out = io.StringIO()
    call_command("retention_run", policy=policy.pk, project=pid, stdout=out)
    (result,) = json.loads(out.getvalue())
    assert result["status"] == "succeeded" and result["counts"]["messages"] == 3
    assert count("Memory", pid) == 1


def test_enforce_all_queues_one_run_of_every_enabled_policy_per_project() -> None:
    """What beat's task queues; beat itself sending it on its schedule is tests/curation/test_beat.py."""
    a, b = make_tenant("beat-a"), make_tenant("beat-b")
    RetentionPolicy.objects.update(enabled=False)
    own = _policy(a.project.id, "messages", "delete", 30)
    everywhere = _policy(None, "orphaned_entities", "delete", 180)
    off = _policy(a.project.id, "messages", "anonymise", 10)
    off.enabled = False
    off.save()
    runs = PolicyRun.objects.filter(pk__in=services.retention_enforce_all())
    pairs = {(r.policy_id, r.project_id) for r in runs}
    assert (own.pk, a.project.id) in pairs and (own.pk, b.project.id) not in pairs
    assert {(everywhere.pk, a.project.id), (everywhere.pk, b.project.id)} <= pairs
    assert off.pk not in {r.policy_id for r in runs}
    assert {r.requested_by for r in runs} == {"celery-beat"}
    assert {r.status for r in runs} == {"queued"}
