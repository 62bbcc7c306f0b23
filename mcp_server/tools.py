"""The MCP tools: each is one REST endpoint of the platform, named and described for an agent.

A tool call is the REST call it names, made in-process with the caller's own key (mcp_server/dispatch.py):
the same validation and limits, the same scopes, the same tenancy (the project is the key's), the same
error vocabulary. Its input schema is the endpoint's request schema from the OpenAPI document
(mcp_server/schemas.py), so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    method: str
    # the endpoint under /api/v1/ ("{project_id}" is the key's project; other names are arguments),
    # or a path from the root when it starts with "/"
    path: str
    read_only: bool = True
    destructive: bool = False
    # the body carries the project id (the DRIFT endpoint takes it there, not in the path)
    project_in_body: bool = False
    # the endpoint publishes retrieval_progress events, sent on as progress notifications
    progress: bool = False

    @property
    def path_args(self) -> tuple[str, ...]:
        names = []
        for part in self.path.split("{")[1:]:
            name = part.split("}", 1)[0]
            if name != "project_id":
                names.append(name)
        return tuple(names)

    @property
    def openapi_path(self) -> str:
        return self.path if self.path.startswith("/") else f"/api/v1/{self.path}"


PROJECT = "projects/{project_id}"

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="search",
        title="Search the knowledge base",
        description=(
            "Search the project's documents: mode vector, fulltext, hybrid (default) or graph, with "
            "optional filters and graph enrichment. Returns ranked chunks with their documents."
        ),
        method="POST",
        path=f"{PROJECT}/search",
    ),
    ToolSpec(
        name="drift_search",
        title="DRIFT search",
        description=(
            "A global question answered over the project's communities and chunks (DRIFT: primer, "
            "follow-ups, reduction). Slower than search; progress notifications carry its phases when "
            "the call asks for progress."
        ),
        method="POST",
        path="/retrieve",
        project_in_body=True,
        progress=True,
    ),
    ToolSpec(
        name="document_add",
        title="Add a document",
        description=(
            "Add a text document to the project; ingestion (chunking, embedding, extraction) runs in "
            "the background. Returns the document id and the job id to follow with job_status."
        ),
        method="POST",
        path=f"{PROJECT}/documents",
        read_only=False,
    ),
    ToolSpec(
        name="document_get",
        title="Get a document",
        description="A document's metadata, status and counts by its id.",
        method="GET",
        path=f"{PROJECT}/documents/{{document_id}}",
    ),
    ToolSpec(
        name="job_status",
        title="Job status",
        description="The state, progress and result of a background job (ingestion, memory processing).",
        method="GET",
        path="jobs/{job_id}",
    ),
    ToolSpec(
        name="memory_add",
        title="Store memories",
        description=(
            "Store conversation messages as memories in a scope (application, agent, user, thread). "
            "Acknowledges with the stored memory ids; a message_id already stored in the scope is not "
            "stored twice."
        ),
        method="POST",
        path=f"{PROJECT}/memories",
        read_only=False,
    ),
    ToolSpec(
        name="memory_search",
        title="Search memories",
        description="Search the memories of a scope (vector, fulltext, hybrid or graph), with time filters.",
        method="POST",
        path=f"{PROJECT}/memories/search",
    ),
    ToolSpec(
        name="memory_forget",
        title="Forget memories",
        description="Erase every memory of a scope and everything derived from them. Cannot be undone.",
        method="POST",
        path=f"{PROJECT}/memories:forget",
        read_only=False,
        destructive=True,
    ),
    ToolSpec(
        name="conversation_references",
        title="A conversation's references",
        description="The documents and chunks a conversation referenced, with how often and when.",
        method="GET",
        path=f"{PROJECT}/conversations/{{conversation_id}}/references",
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}
