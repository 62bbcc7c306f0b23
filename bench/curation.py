"""Curation (issue 9): erasure of a heavy user, a retention run over a million messages, admin pages.

Against the whole platform (`platform/run.py`, processing on store off so only what is measured
uses the cores), each figure next to a peer measured in the same run:

1. Erasure: 1,000 users in one project — 998 with 100 messages each (bulk-loaded with the memory
   app's own properties and scope tokens, random unit vectors) and two heavy users with 10,000
   messages in 100 conversations each, stored through the API with the local embedder, then given
   facts, preferences, mentions and a summary per conversation (the memory app's own derivation)
   and five ADK sessions of 20 events. One heavy user is erased through `POST …/erasure-requests`
   (wall time from the request until the Celery task reports `succeeded`); canary checks: no node
   of the project still holds the user's marker word or e-mail in any text property, no fulltext
   hit, no vector neighbour among the 50 nearest of the user's own texts, no node with the user's
   id. Peer: the naive erasure, one `MATCH (n {project_id, user_id}) DETACH DELETE n`, on the other
   heavy user, with the same canary checks.
2. Admin pages at 100,000+ memories (the same project, before the erasure): the memories page of the
   graph content admin, first page, filtered by user, searched, and 1,000 rows deep through the
   keyset cursor, 50 timed requests each over HTTP with a logged-in session. Peer: the same page
   read the way offset pagination does it (`SKIP 50,000 LIMIT 50` and a count), run directly.
3. Retention over 1,000,000 messages in 10,000 conversations of which 1% are older than the policy's
   30 days: `manage.py retention_run` (the run a Celery worker executes) of an `anonymise` policy,
   wall time and the process's peak resident memory sampled every 20 ms, next to the same Django
   process with only the embedder loaded (the floor). Peer: a job that reads the project's messages
   into the process and filters them there, same sampling. Afterwards: every expired message is
   anonymised, none of the others changed.

BENCH_CURATION_SCALE (default 1) scales the counts down for a quick try; committed figures use 1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.ingestion import _issue_key
from bench.memory import _Api, _driver, _Model, _platform
from bench.retrieval import _pct as _percentile
from bench.rows import row
from bench.startup import REPO, PlatformRun

SCALE = float(os.environ.get("BENCH_CURATION_SCALE", "1"))
ADMIN_PASSWORD = "bench-curator-pw"  # noqa: S105 - a throw-away platform of the benchmark


def _scaled(n: int, minimum: int = 1) -> int:
    return max(minimum, int(n * SCALE))


OTHER_USERS = _scaled(998, 10)
OTHER_PER_USER = 100
HEAVY_CONVERSATIONS = _scaled(100, 5)
HEAVY_PER_CONVERSATION = 100
SESSIONS, EVENTS = 5, 20
PAGE_REQUESTS = 50
RETENTION_CONVERSATIONS = _scaled(10_000, 100)
RETENTION_PER_CONVERSATION = 100
HEAVY = {
    "platform": ("erase-me", "Quokkaberry", "quokka.owner@example.com"),
    "naive": ("naive-me", "Wombatfig", "wombat.owner@example.com"),
}

CARRIES = (
    "any(k IN keys(n) WHERE (n[k] IS :: STRING AND (n[k] CONTAINS $a OR n[k] CONTAINS $b)) "
    "OR (n[k] IS :: LIST<STRING NOT NULL> AND any(x IN n[k] WHERE x CONTAINS $a OR x CONTAINS $b)))"
)


# --- helpers -----------------------------------------------------------------------------------------


def _pct(values: list[float]) -> dict[str, float]:
    return {"p50": round(_percentile(values, 50), 1), "p95": round(_percentile(values, 95), 1)}


def _sampled(cmd: list[str], env: dict[str, str]) -> tuple[str, float, float]:
    """Run `cmd`, sampling its resident memory (with children) every 20 ms: (its standard output,
    peak MiB, s). Standard error is apart: libraries print to it at exit (nanobind's leak report)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        ps = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
                peak[0] = max(peak[0], rss / 2**20)
            except psutil.Error:
                pass
            time.sleep(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    output, errors = proc.communicate()
    done.set()
    thread.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed:\n{output[-2000:]}\n{errors[-2000:]}")
    return output, round(peak[0], 1), round(time.perf_counter() - started, 2)


def _step(
    platform: PlatformRun, step: str, *, loader: str = "bench.curation_loader", **args: Any
) -> tuple[dict[str, Any], float, float]:
    """Run `step` of `loader` (its `main()`) in a `manage.py shell` beside the platform: (its printed
    result, the process's peak MiB, s)."""
    env = {**platform.cli_env(), "BENCH_STEP": step, "BENCH_ARGS": json.dumps(args)}
    output, peak, took = _sampled(
        [sys.executable, "manage.py", "shell", "-c", f"from {loader} import main; main()"], env
    )
    match = re.search(r"^BENCH_RESULT (.*)$", output, re.MULTILINE)
    if not match:
        raise RuntimeError(f"{step} printed no result:\n{output[-3000:]}")
    return json.loads(match.group(1)), peak, took


def _heavy_texts(user: str, marker: str, email: str, conversation: int) -> list[dict[str, Any]]:
    texts = []
    for i in range(HEAVY_PER_CONVERSATION):
        kind = i % 5
        if kind == 0:
            text = f"My name is {user.title()} and I live on {marker} lane {conversation}."
        elif kind == 1:
            text = f"I love {marker} tea and long walks by the harbour, note {conversation}-{i}."
        elif kind == 2:
            text = f"Write to {email} about the {marker} invoice number {conversation * 1000 + i}."
        elif kind == 3:
            text = f"I prefer morning meetings; the {marker} garden needs water on day {i}."
        else:
            text = f"Noted: {marker} plans for week {i} of project {conversation}."
        texts.append({"role": "user" if kind != 4 else "assistant", "text": text})
    return texts


def _load_heavy(api: _Api, user: str, marker: str, email: str) -> None:
    for c in range(HEAVY_CONVERSATIONS):
        body = json.dumps(
            {
                "messages": _heavy_texts(user, marker, email, c),
                "scope": {"application_id": "bench", "user_id": user, "thread_id": f"{user}-{c}"},
            }
        ).encode()
        api.store(body)
    base = f"{api.base}/apps/bench/users/{user}/sessions"
    for _session in range(SESSIONS):
        response = api.client.post(
            base, json={"state": {"user:street": f"{marker} lane"}}, headers=api.headers
        )
        sid = response.json()["id"]
        for e in range(EVENTS):
            event = {
                "author": "user",
                "timestamp": 1_700_000_000.0 + e,
                "content": {
                    "role": "user",
                    "parts": [{"text": f"Ship parcel {e} to {marker} lane, {email}"}],
                },
            }
            api.client.post(f"{base}/{sid}/events", json={"event": event}, headers=api.headers)


def _canary(
    driver: Any, project_id: str, user: str, marker: str, email: str, model: _Model
) -> dict[str, int]:
    with driver.session() as session:
        carriers = session.run(
            f"MATCH (n {{project_id: $p}}) WHERE {CARRIES} RETURN labels(n)[0] AS label, count(*) AS n",
            p=project_id,
            a=marker,
            b=email,
        ).data()
        with_user = session.run(
            "MATCH (n {project_id: $p}) WHERE n.user_id = $u RETURN count(n) AS n", p=project_id, u=user
        ).single()["n"]
        fulltext = 0
        for index in ("memory_fulltext", "memory_level_fulltext"):
            fulltext += session.run(
                "CALL db.index.fulltext.queryNodes($i, $q, {limit: 1000}) YIELD node "
                "WHERE node.project_id = $p RETURN count(node) AS n",
                i=index,
                q=f'text:{marker.lower()} OR text:"{email}"',
                p=project_id,
            ).single()["n"]
        vector = model.embed([f"I love {marker} tea and long walks by the harbour"])[0].tolist()
        neighbours = session.run(
            "CALL db.index.vector.queryNodes('memory_embeddings', 50, $v) YIELD node "
            f"WITH node AS n WHERE n.project_id = $p AND (n.user_id = $u OR {CARRIES}) RETURN count(n) AS n",
            v=vector,
            p=project_id,
            u=user,
            a=marker,
            b=email,
        ).single()["n"]
    return {
        "nodes_with_text": sum(r["n"] for r in carriers),
        "labels_with_text": sorted(r["label"] for r in carriers),
        "nodes_with_user_id": with_user,
        "fulltext_hits": fulltext,
        "vector_neighbours": neighbours,
    }


def _login(platform: PlatformRun) -> httpx.Client:
    client = httpx.Client(base_url=platform.base, timeout=60, follow_redirects=False)
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, "no CSRF token on the login page"
    response = client.post(
        "/admin/login/?next=/admin/",
        data={"username": "admin", "password": ADMIN_PASSWORD, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{platform.base}/admin/login/"},
    )
    assert response.status_code == 302, f"admin login failed: {response.status_code}"
    return client


# --- measurements -------------------------------------------------------------------------------------------


def _admin_pages(platform: PlatformRun, driver: Any, project_id: str) -> dict[str, Any]:
    import base64

    client = _login(platform)
    with driver.session() as session:
        total = session.run("MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n", p=project_id).single()[
            "n"
        ]
        depth = min(50_000, total // 2)
        deep = session.run(
            "MATCH (m:Memory {project_id: $p}) WHERE m.timestamp IS NOT NULL "
            "RETURN m.timestamp AS t, m.id AS id ORDER BY m.timestamp DESC, m.id SKIP $depth LIMIT 1",
            p=project_id,
            depth=depth,
        ).single()
    cursor = base64.urlsafe_b64encode(json.dumps([deep["t"], deep["id"]]).encode()).decode()
    url = "/admin/curation/graphcontent/memories/"
    variants = {
        "first page": {"project": project_id},
        "one user": {"project": project_id, "user_id": "user-7"},
        "search": {"project": project_id, "q": "harbour invoice"},
        "deep (cursor)": {"project": project_id, "cursor": cursor},
    }
    timings: dict[str, list[float]] = {name: [] for name in variants}
    for name, params in variants.items():  # warm
        response = client.get(url, params=params)
        assert response.status_code == 200 and "result_list" in response.text, (name, response.status_code)
    for _ in range(PAGE_REQUESTS):
        for name, params in variants.items():
            t = time.perf_counter()
            response = client.get(url, params=params)
            timings[name].append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200
    peer: list[float] = []
    with driver.session() as session:
        for _ in range(PAGE_REQUESTS // 2):
            t = time.perf_counter()
            session.run("MATCH (m:Memory {project_id: $p}) RETURN count(m) AS n", p=project_id).consume()
            session.run(
                "MATCH (m:Memory {project_id: $p}) RETURN m {.id, .text, .timestamp, .user_id} AS row "
                "ORDER BY m.timestamp DESC, m.id SKIP $depth LIMIT 50",
                p=project_id,
                depth=depth,
            ).data()
            peer.append((time.perf_counter() - t) * 1000)
    client.close()
    return {
        "memories": total,
        "pages_ms": {name: _pct(values) for name, values in timings.items()},
        "depth": depth,
        "peer_offset_ms": _pct(peer),
    }


def _erasure(platform: PlatformRun, admin: str, model: _Model) -> tuple[dict[str, Any], dict[str, Any]]:
    api = _Api(platform, admin, "curation erasure")
    pid = api.project
    admin_key = _issue_key(pid, platform.cli_env(), scopes="admin")
    driver = _driver(platform)
    t = time.perf_counter()
    others, _peak, _took = _step(
        platform, "load_users", project_id=pid, users=OTHER_USERS, per_user=OTHER_PER_USER
    )
    for user, marker, email in HEAVY.values():
        _load_heavy(api, user, marker, email)
    derived = {
        user: _step(platform, "derive", project_id=pid, user_id=user)[0] for user, _m, _e in HEAVY.values()
    }
    load_s = round(time.perf_counter() - t, 1)
    print(f"  loaded {others} and two heavy users ({derived}) in {load_s}s", flush=True)
    pages = _admin_pages(platform, driver, pid)
    print(f"  admin pages: {pages}", flush=True)

    user, marker, email = HEAVY["platform"]
    before = _canary(driver, pid, user, marker, email, model)
    with driver.session() as session:
        others_before = session.run(
            "MATCH (n {project_id: $p}) WHERE n.user_id STARTS WITH 'user-' RETURN count(n) AS n", p=pid
        ).single()["n"]
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=platform.base, timeout=60) as client:
        t = time.perf_counter()
        request = client.post(f"{api.base}/erasure-requests", json={"user_id": user}, headers=headers).json()
        while True:
            got = client.get(f"{api.base}/erasure-requests/{request['id']}", headers=headers).json()
            if got["status"] not in ("queued", "running"):
                break
            time.sleep(0.1)
        wall = round(time.perf_counter() - t, 2)
    after = _canary(driver, pid, user, marker, email, model)
    with driver.session() as session:
        others_after = session.run(
            "MATCH (n {project_id: $p}) WHERE n.user_id STARTS WITH 'user-' RETURN count(n) AS n", p=pid
        ).single()["n"]

    naive_user, naive_marker, naive_email = HEAVY["naive"]
    naive_before = _canary(driver, pid, naive_user, naive_marker, naive_email, model)
    with driver.session() as session:
        t = time.perf_counter()
        session.run("MATCH (n {project_id: $p, user_id: $u}) DETACH DELETE n", p=pid, u=naive_user).consume()
        naive_wall = round(time.perf_counter() - t, 2)
    naive_after = _canary(driver, pid, naive_user, naive_marker, naive_email, model)
    driver.close()
    api.close()
    erasure = {
        "users": OTHER_USERS + 2,
        "heavy_user_messages": HEAVY_CONVERSATIONS * HEAVY_PER_CONVERSATION,
        "heavy_user_conversations": HEAVY_CONVERSATIONS,
        "other_messages": others["messages"],
        "derived_per_heavy_user": derived,
        "load_s": load_s,
        "status": got["status"],
        "counts": got["counts"],
        "wall_s": wall,
        "service_took_ms": got["took_ms"],
        "canary_before": before,
        "canary_after": after,
        "other_users_nodes_before_after": [others_before, others_after],
        "naive": {"wall_s": naive_wall, "canary_before": naive_before, "canary_after": naive_after},
    }
    return erasure, pages


def _retention(platform: PlatformRun, admin: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The peer reads the corpus first (it writes nothing), then the run anonymises it."""
    api = _Api(platform, admin, "curation retention")
    pid = api.project
    api.close()
    loaded, _p, _t = _step(
        platform,
        "load_retention",
        project_id=pid,
        conversations=RETENTION_CONVERSATIONS,
        per_conversation=RETENTION_PER_CONVERSATION,
        expired_per_conversation=1,
        age_days=45,
    )
    print(f"  retention corpus: {loaded}", flush=True)
    _floor, floor_peak, _t = _step(platform, "baseline")
    naive, naive_peak, naive_took = _step(platform, "naive_retention", project_id=pid, age_days=30)
    peer = {"result": naive, "peak_rss_mib": naive_peak, "process_s": naive_took}
    print(f"  retention peer: {peer}", flush=True)
    policy, _p, _t = _step(
        platform,
        "policy",
        project_id=pid,
        name="bench anonymise",
        kind="messages",
        age_days=30,
        action="anonymise",
    )
    output, peak, took = _sampled(
        [
            sys.executable,
            "manage.py",
            "retention_run",
            "--policy",
            str(policy["policy_id"]),
            "--project",
            pid,
        ],
        platform.cli_env(),
    )
    (result,) = json.loads(output.strip().splitlines()[-1])
    driver = _driver(platform)
    with driver.session() as session:
        check = (
            session.run(
                "MATCH (m:Memory {project_id: $p}) "
                "RETURN count(m) AS n, count(m.anonymized_at) AS anonymised, "
                "count(CASE WHEN m.text CONTAINS '@example.org' THEN 1 END) AS with_email",
                p=pid,
            )
            .single()
            .data()
        )
    driver.close()
    retention = {
        "messages": loaded["messages"],
        "expired": loaded["expired"],
        "load_s": loaded["load_s"],
        "run": result,
        "run_process_s": took,
        "peak_rss_mib": peak,
        "floor_rss_mib": floor_peak,
        "check": check,
    }
    return retention, peer


def run() -> dict[str, Any]:
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-curation-"))
    model = _Model()
    figures: dict[str, Any] = {"scale": SCALE}
    try:
        with _platform(
            tmp, "curation", MEMORY_PROCESS_ON_STORE="false", DJANGO_ADMIN_PASSWORD=ADMIN_PASSWORD
        ) as (
            platform,
            admin,
        ):
            figures["erasure"], figures["admin_pages"] = _erasure(platform, admin, model)
            print(f"  erasure: {figures['erasure']}", flush=True)
            figures["retention"], figures["retention_peer"] = _retention(platform, admin)
            print(f"  retention: {figures['retention']}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    return {"rows": _rows(figures), "figures": figures}


def _rows(f: dict[str, Any]) -> list[dict[str, Any]]:
    e, pages, r, peer = f["erasure"], f["admin_pages"], f["retention"], f["retention_peer"]
    after, naive_after = e["canary_after"], e["naive"]["canary_after"]

    def survivors(c: dict[str, Any]) -> str:
        labels = ", ".join(sorted(set(c["labels_with_text"]))) or "none"
        return (
            f"{c['nodes_with_text']} nodes with text ({labels}), {c['nodes_with_user_id']} with user id, "
            f"{c['fulltext_hits']} fulltext, {c['vector_neighbours']} vector"
        )

    first, deep = pages["pages_ms"]["first page"], pages["pages_ms"]["deep (cursor)"]
    return [
        row(
            f"erase 1 user ({e['heavy_user_messages']:,} messages, "
            f"{e['heavy_user_conversations']} conversations) among {e['users']:,} users, wall",
            e["wall_s"],
            "s",
            peer=("naive DETACH DELETE by user_id, direct Cypher", e["naive"]["wall_s"]),
            target=("<=", 60),
        ),
        row(
            "erasure canary: what still holds the user's text",
            survivors(after),
            "",
            peer=("naive DETACH DELETE by user_id", survivors(naive_after)),
        ),
        row(
            f"retention run, {r['messages']:,} messages, {r['expired']:,} expired (anonymised)",
            r["run"]["took_s"],
            "s",
            peer=("naive: read all into the process, anonymise + embed, no writes", peer["result"]["took_s"]),
        ),
        row(
            "retention run peak memory",
            r["peak_rss_mib"],
            "MiB",
            peer=("naive: read all into the process", peer["peak_rss_mib"]),
            floor=("Django + embedder loaded", r["floor_rss_mib"]),
        ),
        row(
            f"admin memories page p50 / p95 at {pages['memories'] // 1000}k memories",
            [first["p50"], first["p95"]],
            "ms",
            peer=(
                f"offset page SKIP {pages['depth']:,} + count, direct Cypher",
                [pages["peer_offset_ms"]["p50"], pages["peer_offset_ms"]["p95"]],
            ),
            target=("<=", 500),
        ),
        row(
            f"admin memories page {pages['depth']:,} rows deep (keyset cursor) p50 / p95",
            [deep["p50"], deep["p95"]],
            "ms",
            peer=(
                f"offset page SKIP {pages['depth']:,} + count, direct Cypher",
                [pages["peer_offset_ms"]["p50"], pages["peer_offset_ms"]["p95"]],
            ),
        ),
    ] + [
        row(
            f"admin memories page, {name}, p50 / p95",
            [v["p50"], v["p95"]],
            "ms",
            context=("first page", [first["p50"], first["p95"]]),
        )
        for name, v in pages["pages_ms"].items()
        if name in ("one user", "search")
    ]
