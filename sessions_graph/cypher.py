"""Cypher of the sessions_graph app (seed 004). Always parameterised and scoped by $project_id.

Concurrent writers of one session are ordered by setting `_lock` on the session node first: the
second writer waits for the first to commit, then reads its `last_update_time` (and fails the
optimistic check, or appends after it with the next `seq`).
"""

from __future__ import annotations

SCHEMA: list[str] = [
    "CREATE CONSTRAINT session_key IF NOT EXISTS "
    "FOR (s:Session) REQUIRE (s.project_id, s.app_name, s.user_id, s.session_id) IS UNIQUE",
    "CREATE INDEX session_listing IF NOT EXISTS "
    "FOR (s:Session) ON (s.project_id, s.app_name, s.user_id, s.last_update_time)",
    "CREATE INDEX event_by_seq IF NOT EXISTS FOR (e:Event) ON (e.session_uid, e.seq)",
    "CREATE INDEX event_by_time IF NOT EXISTS FOR (e:Event) ON (e.session_uid, e.timestamp)",
    "CREATE CONSTRAINT app_key IF NOT EXISTS FOR (a:App) REQUIRE (a.project_id, a.name) IS UNIQUE",
    "CREATE CONSTRAINT user_key IF NOT EXISTS FOR (u:User) REQUIRE (u.project_id, u.app_name, u.user_id) IS UNIQUE",
    "CREATE CONSTRAINT app_state_key IF NOT EXISTS FOR (a:AppState) REQUIRE (a.project_id, a.app_name) IS UNIQUE",
    "CREATE CONSTRAINT user_state_key IF NOT EXISTS "
    "FOR (u:UserState) REQUIRE (u.project_id, u.app_name, u.user_id) IS UNIQUE",
]

# Data written by an earlier version, brought up to date after the schema is applied (each a no-op once
# done): sessions stored before session times were ADK's float seconds and `revision` existed.
MIGRATIONS: list[str] = [
    "MATCH (s:Session) WHERE s.revision IS NULL "
    "SET s.revision = coalesce(s.event_count, 0), s.created_at = toFloat(s.created_at) / 1000.0, "
    "s.last_update_time = toFloat(s.last_update_time) / 1000.0",
]

SESSION_FIELDS = """s {.id, .session_id, .app_name, .user_id, .state_json, .created_at, .last_update_time,
                  .revision, .event_count} AS session"""

# A new session, read back with the app and user state it starts with.
SESSION_CREATE = (
    """
MERGE (a:App {project_id: $project_id, name: $app_name})
  ON CREATE SET a.id = randomUUID()
MERGE (u:User {project_id: $project_id, app_name: $app_name, user_id: $user_id})
  ON CREATE SET u.id = randomUUID()
MERGE (a)-[:HAS_USER]->(u)
CREATE (s:Session {id: $uid, project_id: $project_id, app_name: $app_name, user_id: $user_id,
                   session_id: $session_id, state_json: $state_json, created_at: $now,
                   last_update_time: $now, revision: 0, event_count: 0, in_time_order: true})
CREATE (u)-[:STARTED_SESSION]->(s)
WITH s
OPTIONAL MATCH (ap:AppState {project_id: $project_id, app_name: $app_name})
OPTIONAL MATCH (us:UserState {project_id: $project_id, app_name: $app_name, user_id: $user_id})
RETURN """
    + SESSION_FIELDS
    + ", ap.state_json AS app_state, us.state_json AS user_state"
)

SESSION_GET = (
    """
MATCH (s:Session {project_id: $project_id, app_name: $app_name, user_id: $user_id, session_id: $session_id})
USING INDEX s:Session(project_id, app_name, user_id, session_id)
RETURN """
    + SESSION_FIELDS
)

SHADOW_STATE = """
OPTIONAL MATCH (a:AppState {project_id: $project_id, app_name: $app_name})
OPTIONAL MATCH (u:UserState {project_id: $project_id, app_name: $app_name, user_id: $user_id})
RETURN a.state_json AS app_state, u.state_json AS user_state
"""

# Events are in ADK's order: by timestamp, ties in append order (seq). The range on `timestamp` lets
# the (session_uid, timestamp) index give that order, so a page touches only its own events.
_EVENT_AFTER_CURSOR = "($c_ts IS NULL OR e.timestamp > $c_ts OR (e.timestamp = $c_ts AND e.seq > $c_seq))"
_EVENT_ROW = "collect([e.event_json, e.timestamp, e.seq]) AS events"

# A page of the session's events, oldest first: from `$floor` (a time) and after the cursor ...
_EVENTS_PAGE = f"""
  MATCH (e:Event)
  WHERE e.session_uid = s.id AND e.timestamp >= $floor AND {_EVENT_AFTER_CURSOR}
  WITH e ORDER BY e.timestamp, e.seq LIMIT $limit
  RETURN {_EVENT_ROW}
"""
# ... or the same page within the `$recent` latest events only (ADK's num_recent_events). While a
# session's events were appended in time order (`in_time_order`), the latest are the last by seq: the
# (session_uid, seq) index reads just those. Otherwise the (session_uid, timestamp) index gives the
# time of the $recent-th latest, and the events from that time on (ties included) are ordered exactly ...
_EVENTS_RECENT_PAGE = f"""
  CALL (s) {{
    WITH s WHERE s.in_time_order
    MATCH (e:Event)
    WHERE e.session_uid = s.id AND e.seq > s.event_count - $recent AND e.timestamp >= $floor
    RETURN e
    UNION
    WITH s WHERE NOT coalesce(s.in_time_order, false)
    CALL (s) {{
      MATCH (e:Event)
      WHERE e.session_uid = s.id AND e.timestamp >= $floor
      WITH e.timestamp AS t ORDER BY t DESC LIMIT $recent
      RETURN coalesce(min(t), $floor) AS from_time
    }}
    MATCH (e:Event)
    WHERE e.session_uid = s.id AND e.timestamp >= from_time
    RETURN e
  }}
  WITH e ORDER BY e.timestamp DESC, e.seq DESC LIMIT $recent
  WITH e WHERE {_EVENT_AFTER_CURSOR}
  WITH e ORDER BY e.timestamp, e.seq LIMIT $limit
  RETURN {_EVENT_ROW}
"""
# ... or none.
_NO_EVENTS = "RETURN [] AS events"

# A session with its app and user state and one page of its events, in one read.
_SESSION_READ = """
MATCH (s:Session {{project_id: $project_id, app_name: $app_name, user_id: $user_id, session_id: $session_id}})
USING INDEX s:Session(project_id, app_name, user_id, session_id)
OPTIONAL MATCH (a:AppState {{project_id: $project_id, app_name: $app_name}})
OPTIONAL MATCH (u:UserState {{project_id: $project_id, app_name: $app_name, user_id: $user_id}})
CALL (s) {{ {events} }}
RETURN s {{.id, .session_id, .app_name, .user_id, .state_json, .created_at, .last_update_time, .revision,
          .event_count}} AS session, a.state_json AS app_state, u.state_json AS user_state, events
"""
SESSION_READ = _SESSION_READ.format(events=_NO_EVENTS)
SESSION_READ_EVENTS = _SESSION_READ.format(events=_EVENTS_PAGE)
SESSION_READ_RECENT = _SESSION_READ.format(events=_EVENTS_RECENT_PAGE)

# One row holding a list of lists: a listing may return 10,000 sessions, and one list decodes far
# faster than 10,000 records. App and user are the caller's.
SESSIONS_LIST = """
MATCH (s:Session)
USING INDEX s:Session(project_id, app_name, user_id, last_update_time)
WHERE s.project_id = $project_id AND s.app_name = $app_name AND s.user_id = $user_id
  AND s.last_update_time IS NOT NULL
  AND ($before IS NULL OR s.last_update_time < $before
       OR (s.last_update_time = $before AND s.session_id < $before_id))
WITH s ORDER BY s.last_update_time DESC, s.session_id DESC
LIMIT $limit
RETURN collect([s.session_id, s.state_json, s.created_at, s.last_update_time, s.revision, s.event_count]) AS rows
"""

# Every user's sessions of an app (ADK's list_sessions without a user), newest first, each with its
# user's shadow state. The cursor is the last row's (last_update_time, user_id, session_id).
SESSIONS_LIST_APP = """
MATCH (s:Session)
WHERE s.project_id = $project_id AND s.app_name = $app_name AND s.last_update_time IS NOT NULL
  AND ($before IS NULL OR s.last_update_time < $before
       OR (s.last_update_time = $before AND (s.user_id < $before_user
           OR (s.user_id = $before_user AND s.session_id < $before_id))))
WITH s ORDER BY s.last_update_time DESC, s.user_id DESC, s.session_id DESC
LIMIT $limit
OPTIONAL MATCH (u:UserState {project_id: $project_id, app_name: $app_name, user_id: s.user_id})
RETURN collect([s.user_id, s.session_id, s.state_json, s.created_at, s.last_update_time, s.revision,
                s.event_count, u.state_json]) AS rows
"""

APP_STATE = """
OPTIONAL MATCH (a:AppState {project_id: $project_id, app_name: $app_name})
RETURN a.state_json AS app_state
"""

# A memory of this app and user (the scope check of a delete by id).
MEMORY_IN_SCOPE = """
MATCH (m:Memory {project_id: $project_id, id: $memory_id})
WHERE m.application_id = $app_name AND m.user_id = $user_id
RETURN m.id AS id
"""

SESSION_DELETE = """
MATCH (s:Session {project_id: $project_id, app_name: $app_name, user_id: $user_id, session_id: $session_id})
USING INDEX s:Session(project_id, app_name, user_id, session_id)
WITH s, s.id AS uid
CALL (uid) {
  MATCH (t:ToolCall {session_uid: uid}) DETACH DELETE t
}
CALL (uid) {
  MATCH (e:Event) WHERE e.session_uid = uid DETACH DELETE e
}
DETACH DELETE s
RETURN uid
"""

SESSION_LOCK = """
MATCH (s:Session {project_id: $project_id, app_name: $app_name, user_id: $user_id, session_id: $session_id})
USING INDEX s:Session(project_id, app_name, user_id, session_id)
SET s._lock = true
RETURN s.id AS uid, s.last_update_time AS last_update_time, s.revision AS revision,
       s.event_count AS event_count, s.state_json AS state_json, s.max_event_time AS max_event_time
"""

SHADOW_LOCK = """
MERGE (a:AppState {project_id: $project_id, app_name: $app_name})
  ON CREATE SET a.id = randomUUID(), a.state_json = '{}'
SET a._lock = true
WITH a
MERGE (u:UserState {project_id: $project_id, app_name: $app_name, user_id: $user_id})
  ON CREATE SET u.id = randomUUID(), u.state_json = '{}'
SET u._lock = true
RETURN a.state_json AS app_state, u.state_json AS user_state
"""

SHADOW_WRITE = """
MATCH (a:AppState {project_id: $project_id, app_name: $app_name})
MATCH (u:UserState {project_id: $project_id, app_name: $app_name, user_id: $user_id})
SET a.state_json = $app_state, a.version = $now, u.state_json = $user_state, u.version = $now
REMOVE a._lock, u._lock
"""

# A batch of events in one statement, in order: for each, the node, its place in the chain, the state
# it wrote, the tools it called or answered. Each run of the subquery sees the writes of the runs before
# it (Cypher's CALL semantics), so an event links to the one just written and answers its tool calls.
# The session's state is the one after the last event.
EVENTS_APPEND = """
UNWIND $events AS ev
CALL (ev) {
  MATCH (s:Session {id: $uid})
  WITH s, coalesce(s.in_time_order, false) AND ev.event.timestamp >= coalesce(s.max_event_time, ev.event.timestamp)
          AS in_time_order,
       CASE WHEN s.max_event_time > ev.event.timestamp THEN s.max_event_time ELSE ev.event.timestamp END
          AS max_time
  CREATE (e:Event {id: randomUUID(), project_id: $project_id, session_uid: $uid, event_id: ev.event.event_id,
                   seq: ev.event.seq, author: ev.event.author, timestamp: ev.event.timestamp,
                   invocation_id: ev.event.invocation_id, content_json: ev.event.content_json,
                   actions_json: ev.event.actions_json, event_json: ev.event.event_json, text: ev.event.text})
  CREATE (e)-[:OF_SESSION]->(s)
  SET s.last_update_time = ev.event.timestamp, s.revision = s.revision + 1,
      s.event_count = ev.event.seq, s.in_time_order = in_time_order, s.max_event_time = max_time
  REMOVE s._lock
  WITH s, e
  CALL (e, ev) {
    MATCH (prev:Event) WHERE prev.session_uid = $uid AND prev.seq = ev.event.seq - 1
    CREATE (prev)-[:NEXT]->(e)
  }
  CALL (s, e, ev) {
    UNWIND ev.writes AS w
    CREATE (e)-[:WROTE_STATE {key: w.key, from_value_json: w.from_json, to_value_json: w.to_json,
                              timestamp: ev.event.timestamp}]->(s)
  }
  CALL (e, ev) {
    UNWIND ev.calls AS c
    CREATE (t:ToolCall {id: randomUUID(), project_id: $project_id, session_uid: $uid, call_id: c.call_id,
                        name: c.name, parameters_json: c.parameters_json, timestamp: ev.event.timestamp,
                        status: 'called'})
    CREATE (e)-[:INVOKED_TOOL]->(t)
  }
  CALL (e, ev) {
    UNWIND ev.responses AS r
    MATCH (t:ToolCall {session_uid: $uid})
    WHERE (r.call_id IS NOT NULL AND t.call_id = r.call_id)
       OR (r.call_id IS NULL AND t.name = r.name AND t.status = 'called')
    WITH r, t ORDER BY t.timestamp DESC LIMIT 1
    SET t.status = CASE WHEN r.error THEN 'error' ELSE 'responded' END,
        t.latency_ms = toInteger(round((ev.event.timestamp - t.timestamp) * 1000)),
        t.response_json = r.response_json, t.error_msg = r.error_msg
    CREATE (e)-[:RESPONDED_TO]->(t)
  }
}
WITH count(*) AS written
MATCH (s:Session {id: $uid})
SET s.state_json = $state_json
RETURN written
"""

TIMELINE = """
MATCH (e:Event)
WHERE e.session_uid = $uid AND e.seq > $after_seq
WITH e ORDER BY e.seq LIMIT $limit
OPTIONAL MATCH (e)-[w:WROTE_STATE]->(:Session)
WITH e, collect(w {.key, .from_value_json, .to_value_json}) AS writes
OPTIONAL MATCH (e)-[:INVOKED_TOOL]->(t:ToolCall)
WITH e, writes, collect(t {.call_id, .name, .parameters_json, .status, .latency_ms, .error_msg}) AS calls
OPTIONAL MATCH (e)-[:RESPONDED_TO]->(r:ToolCall)
RETURN e.seq AS seq, e.event_id AS event_id, e.author AS author, e.timestamp AS timestamp, e.text AS text,
       writes, calls, collect(r.call_id) AS responded
ORDER BY seq
"""

TOOL_STATS = """
MATCH (t:ToolCall {session_uid: $uid})
RETURN t.name AS name, count(t) AS calls, count(t.latency_ms) AS responded,
       sum(CASE WHEN t.status = 'error' THEN 1 ELSE 0 END) AS errors,
       avg(t.latency_ms) AS avg_latency_ms, max(t.latency_ms) AS max_latency_ms
ORDER BY calls DESC, name
"""

STATE_HISTORY = """
MATCH (e:Event)-[w:WROTE_STATE]->(s:Session {id: $uid})
WHERE $key IS NULL OR w.key = $key
RETURN w.key AS key, w.from_value_json AS from_json, w.to_value_json AS to_json, w.timestamp AS timestamp,
       e.event_id AS event_id, e.author AS author, e.seq AS seq
ORDER BY e.seq, key
LIMIT $limit
"""

# Events of a session already added to memory (the memory app's Memory nodes of that session's scope).
MEMORY_EVENT_IDS = """
MATCH (m:Memory {project_id: $project_id, thread_id: $session_id})
WHERE m.application_id = $app_name AND m.user_id = $user_id AND m.agent_id IS NULL AND m.message_id IN $event_ids
RETURN collect(m.message_id) AS present
"""

SESSION_EVENTS_ALL = """
MATCH (s:Session {project_id: $project_id, app_name: $app_name, user_id: $user_id, session_id: $session_id})
USING INDEX s:Session(project_id, app_name, user_id, session_id)
MATCH (e:Event) WHERE e.session_uid = s.id
RETURN e.event_json AS event_json
ORDER BY e.seq
"""

# --- erasure of a user ----------------------------------------------------------------------------------

# A batch of the user's sessions with their events and tool calls.
USER_SESSIONS_DELETE = """
MATCH (s:Session {project_id: $project_id})
WHERE s.user_id = $user_id
WITH s LIMIT $batch
WITH collect(s) AS ss, [s IN collect(s) | s.id] AS uids
CALL (uids) {
  UNWIND uids AS uid
  MATCH (t:ToolCall {session_uid: uid})
  DETACH DELETE t
  RETURN count(*) AS tool_calls
}
CALL (uids) {
  UNWIND uids AS uid
  MATCH (e:Event) WHERE e.session_uid = uid
  DETACH DELETE e
  RETURN count(*) AS events
}
FOREACH (s IN ss | DETACH DELETE s)
RETURN size(ss) AS sessions, tool_calls, events
"""

USER_STATE_DELETE = """
CALL () {
  MATCH (u:UserState {project_id: $project_id}) WHERE u.user_id = $user_id
  DETACH DELETE u
  RETURN count(*) AS user_states
}
CALL () {
  MATCH (u:User {project_id: $project_id}) WHERE u.user_id = $user_id
  DETACH DELETE u
  RETURN count(*) AS users
}
RETURN user_states, users
"""
