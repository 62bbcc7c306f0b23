// DRIFT search page (/ui/drift/). Plain JavaScript, no build step.
//
// Every piece of text that comes from the server is put into the page as a text node (textContent,
// createTextNode): nothing is ever parsed as HTML, so the minimal markdown below builds elements
// around escaped text instead of producing an HTML string.
"use strict";

(() => {
  const KEY_STORE = "kp.drift.apiKey";
  const PROJECT_STORE = "kp.drift.projectId";
  const TERMINAL_PHASES = new Set(["completed", "error"]);
  const SOCKET_OPEN_TIMEOUT_MS = 5000;
  const SOCKET_LINGER_MS = 3000; // events may trail the HTTP answer a little

  const byId = (id) => document.getElementById(id);
  const ui = {
    app: byId("app"),
    keyForm: byId("key-form"),
    key: byId("api-key"),
    keyForget: byId("key-forget"),
    project: byId("project"),
    searchForm: byId("search-form"),
    question: byId("question"),
    search: byId("search"),
    streamState: byId("stream-state"),
    status: byId("status"),
    bar: byId("progress-bar"),
    pct: byId("progress-pct"),
    phase: byId("progress-phase"),
    thoughts: byId("thought-panel"),
    noData: byId("no-data"),
    answer: byId("answer"),
    finalAnswer: byId("final-answer"),
    keyFacts: byId("key-facts"),
    residual: byId("residual-uncertainty"),
    answerMeta: byId("answer-meta"),
    chunkPanel: byId("chunk-panel"),
    chunkDocument: byId("chunk-document"),
    chunkMeta: byId("chunk-meta"),
    chunkText: byId("chunk-text"),
    chunkClose: byId("chunk-close"),
  };

  const state = { key: "", projectId: "", busy: false, progress: 0, seen: new Set(), chunkRequest: 0 };

  // --- small DOM helpers ------------------------------------------------------------------------

  function element(tag, props = {}, children = []) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props)) {
      if (name === "text") node.textContent = value;
      else if (name === "className") node.className = value;
      else if (name === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(name, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  function clear(node) {
    node.replaceChildren();
  }

  // --- minimal markdown: **bold**, `code`, "- " / "* " list items, line breaks --------------------

  function inlineMarkdown(text) {
    const fragment = document.createDocumentFragment();
    const pattern = /\*\*(.+?)\*\*|`([^`]+)`/g;
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      if (match.index > last) fragment.append(document.createTextNode(text.slice(last, match.index)));
      if (match[1] !== undefined) fragment.append(element("strong", { text: match[1] }));
      else fragment.append(element("code", { text: match[2] }));
      last = match.index + match[0].length;
    }
    if (last < text.length) fragment.append(document.createTextNode(text.slice(last)));
    return fragment;
  }

  function renderMarkdown(markdown) {
    const fragment = document.createDocumentFragment();
    const lines = String(markdown || "").replace(/\r\n?/g, "\n").split("\n");
    let list = null;
    let paragraph = null;
    for (const line of lines) {
      const item = /^\s*[-*]\s+(.*)$/.exec(line);
      if (item) {
        paragraph = null;
        if (!list) {
          list = element("ul");
          fragment.append(list);
        }
        list.append(element("li", {}, [inlineMarkdown(item[1])]));
        continue;
      }
      list = null;
      if (!line.trim()) {
        paragraph = null;
        continue;
      }
      if (paragraph) paragraph.append(element("br"));
      else {
        paragraph = element("p");
        fragment.append(paragraph);
      }
      paragraph.append(inlineMarkdown(line));
    }
    return fragment;
  }

  // --- status line ------------------------------------------------------------------------------

  function showStatus(message, kind = "info") {
    ui.status.hidden = !message;
    ui.status.className = `status status-${kind}`;
    ui.status.dataset.kind = kind;
    ui.status.textContent = message || "";
  }

  function errorText(error) {
    if (!(error instanceof ApiError)) return `Unexpected error: ${error && error.message ? error.message : error}`;
    if (error.status === 0) return `${error.message}.`;
    if (error.status === 401) return `The API key was refused (${error.message}).`;
    if (error.status === 404) return `Not found: ${error.message}.`;
    return `Error ${error.status} (${error.code}): ${error.message}`;
  }

  // --- API calls --------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message, details) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details || {};
    }
  }

  async function api(method, path, body) {
    const headers = { Authorization: `Bearer ${state.key}`, Accept: "application/json" };
    const init = { method, headers, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (_networkError) {
      throw new ApiError(0, "network_error", "The server could not be reached");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_notJson) {
      data = null;
    }
    if (!response.ok) {
      const error = (data && data.error) || {};
      throw new ApiError(
        response.status,
        error.code || `http_${response.status}`,
        error.message || response.statusText || "request failed",
        error.details,
      );
    }
    return data;
  }

  const projectPath = (projectId) => `/api/v1/projects/${encodeURIComponent(projectId)}`;

  // --- key and projects -------------------------------------------------------------------------

  function setProjects(projects, message) {
    clear(ui.project);
    if (!projects.length) {
      ui.project.append(element("option", { value: "", text: message || "No project" }));
      ui.project.disabled = true;
      state.projectId = "";
    } else {
      for (const project of projects) {
        ui.project.append(element("option", { value: project.id, text: `${project.name} (${project.id})` }));
      }
      ui.project.disabled = false;
      const remembered = sessionStorage.getItem(PROJECT_STORE);
      if (remembered && projects.some((p) => p.id === remembered)) ui.project.value = remembered;
      state.projectId = ui.project.value;
    }
    updateSearchButton();
  }

  async function useKey(key) {
    state.key = key.trim();
    ui.project.dataset.loaded = "false";
    if (!state.key) {
      setProjects([], "Enter an API key first");
      return;
    }
    sessionStorage.setItem(KEY_STORE, state.key);
    setProjects([], "Loading projects…");
    try {
      const page = await api("GET", "/api/v1/projects");
      const projects = page.items || [];
      setProjects(projects, "This key sees no project");
      showStatus(projects.length ? "" : "This key sees no project.", "error");
    } catch (error) {
      setProjects([], "No project");
      showStatus(errorText(error), "error");
    }
    ui.project.dataset.loaded = "true";
  }

  function forgetKey() {
    sessionStorage.removeItem(KEY_STORE);
    sessionStorage.removeItem(PROJECT_STORE);
    state.key = "";
    ui.key.value = "";
    setProjects([], "Enter an API key first");
    showStatus("");
  }

  function updateSearchButton() {
    ui.search.disabled = state.busy || !state.key || !state.projectId;
  }

  function setBusy(busy) {
    state.busy = busy;
    ui.app.dataset.state = busy ? "running" : ui.app.dataset.state === "running" ? "done" : ui.app.dataset.state;
    ui.search.textContent = busy ? "Searching…" : "Search";
    ui.project.disabled = busy || ui.project.options.length === 0 || !ui.project.value;
    updateSearchButton();
  }

  // --- progress ---------------------------------------------------------------------------------

  function setProgress(pct, phase) {
    state.progress = Math.max(state.progress, Math.min(100, Math.max(0, Number(pct) || 0)));
    ui.bar.style.width = `${state.progress}%`;
    ui.bar.dataset.pct = String(state.progress);
    ui.pct.textContent = String(state.progress);
    ui.pct.setAttribute("aria-valuenow", String(state.progress));
    if (phase) ui.phase.textContent = `· ${phase.replaceAll("_", " ")}`;
  }

  function showEvent(event) {
    if (event.message_id && state.seen.has(event.message_id)) return;
    if (event.message_id) state.seen.add(event.message_id);
    const phase = String(event.phase || "");
    const time = event.timestamp ? new Date(event.timestamp) : null;
    const item = element("li", { className: `thought phase-${phase.replace(/[^a-z_]/g, "")}`, dataset: { testid: "thought-event", phase } }, [
      element("div", { className: "thought-head" }, [
        element("span", { className: "badge", text: phase.replaceAll("_", " ") }),
        element("span", { className: "summary", text: String(event.thought_summary || "") }),
        element("span", { className: "muted when", text: time && !Number.isNaN(time.getTime()) ? time.toLocaleTimeString() : "" }),
      ]),
    ]);
    if (event.details_md) item.append(element("div", { className: "details" }, [renderMarkdown(String(event.details_md))]));
    ui.thoughts.append(item);
    item.scrollIntoView({ block: "nearest" });
    setProgress(event.progress_pct, phase);
  }

  function newRetrievalId() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return `ui-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
  }

  // The project's progress socket, open before the search is posted so that no event is missed.
  // Resolves to null when it cannot be opened: the search still runs, without live progress.
  function openStream(projectId, retrievalId) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${location.host}/ws/v1/projects/${encodeURIComponent(projectId)}/progress/`;
    return new Promise((resolve) => {
      let socket;
      try {
        socket = new WebSocket(url, ["bearer", state.key]);
      } catch (_badKey) {
        ui.streamState.textContent = "live progress unavailable";
        resolve(null);
        return;
      }
      let opened = false;
      let terminal = false;
      const waiting = [];
      const release = () => waiting.splice(0).forEach((done) => done());
      const stream = {
        close() {
          socket.close(1000);
        },
        settled(timeoutMs) {
          if (terminal || socket.readyState !== WebSocket.OPEN) return Promise.resolve();
          return new Promise((done) => {
            const timer = setTimeout(done, timeoutMs);
            waiting.push(() => {
              clearTimeout(timer);
              done();
            });
          });
        },
      };
      const timer = setTimeout(() => {
        ui.streamState.textContent = "live progress unavailable (no answer from the socket)";
        socket.close();
        resolve(null);
      }, SOCKET_OPEN_TIMEOUT_MS);
      socket.addEventListener("open", () => {
        opened = true;
        clearTimeout(timer);
        ui.streamState.textContent = "live progress connected";
        ui.streamState.dataset.state = "open";
        resolve(stream);
      });
      socket.addEventListener("message", (message) => {
        let event;
        try {
          event = JSON.parse(message.data);
        } catch (_notJson) {
          return;
        }
        if (!event || event.message_type !== "retrieval_progress" || event.retrieval_id !== retrievalId) return;
        showEvent(event);
        if (TERMINAL_PHASES.has(event.phase)) {
          terminal = true;
          release();
        }
      });
      socket.addEventListener("close", () => {
        clearTimeout(timer);
        ui.streamState.dataset.state = "closed";
        if (!opened) {
          ui.streamState.textContent = "live progress unavailable (the socket refused this key)";
          resolve(null);
        } else {
          ui.streamState.textContent = terminal ? "live progress complete" : "live progress disconnected";
        }
        release();
      });
    });
  }

  // --- results ----------------------------------------------------------------------------------

  function resetResults() {
    state.progress = 0;
    state.seen.clear();
    clear(ui.thoughts);
    setProgress(0, "");
    ui.phase.textContent = "";
    ui.streamState.textContent = "";
    delete ui.streamState.dataset.state;
    ui.noData.hidden = true;
    ui.answer.hidden = true;
    clear(ui.finalAnswer);
    clear(ui.keyFacts);
    ui.residual.textContent = "";
    ui.answerMeta.textContent = "";
    closeChunk();
    showStatus("");
  }

  function citationChip(citation, projectId) {
    const isObject = citation !== null && typeof citation === "object";
    const chunkId = String(isObject ? citation.chunk_id || "" : citation);
    const label = isObject ? String(citation.document_name || chunkId) : chunkId;
    const chip = element("button", {
      type: "button",
      className: isObject ? "chip" : "chip chip-id",
      text: label,
      title: isObject && citation.span ? String(citation.span) : chunkId,
      dataset: { testid: "citation", chunkId },
    });
    chip.addEventListener("click", () => showChunk(projectId, chunkId, isObject ? citation : null, chip));
    return chip;
  }

  function renderResult(result, projectId) {
    const meta = [`mode ${result.mode || "?"}`];
    if (typeof result.took_ms === "number") meta.push(`${Math.round(result.took_ms)} ms`);
    if (result.retrieval_id) meta.push(`retrieval ${result.retrieval_id}`);
    ui.answerMeta.textContent = meta.join(" · ");
    if (result.no_data_found) {
      ui.noData.hidden = false;
      return;
    }
    ui.finalAnswer.append(renderMarkdown(String(result.final_answer || "")));
    for (const fact of result.key_facts || []) {
      const citations = element("span", { className: "citations" });
      for (const citation of fact.citations || []) citations.append(citationChip(citation, projectId));
      ui.keyFacts.append(
        element("li", { dataset: { testid: "key-fact" } }, [
          element("span", { className: "fact" }, [inlineMarkdown(String(fact.fact || ""))]),
          citations,
        ]),
      );
    }
    if (!ui.keyFacts.children.length) ui.keyFacts.append(element("li", { className: "muted", text: "none" }));
    ui.residual.textContent = String(result.residual_uncertainty || "—");
    ui.answer.hidden = false;
  }

  // --- chunk panel ------------------------------------------------------------------------------

  function closeChunk() {
    state.chunkRequest += 1;
    ui.chunkPanel.hidden = true;
    ui.chunkPanel.dataset.state = "closed";
    for (const chip of document.querySelectorAll(".chip.active")) chip.classList.remove("active");
  }

  // The chunk's text, with the cited span marked when it occurs verbatim.
  function renderChunkText(text, span) {
    clear(ui.chunkText);
    const at = span ? text.indexOf(span) : -1;
    if (at < 0) {
      ui.chunkText.textContent = text;
      return;
    }
    ui.chunkText.append(
      document.createTextNode(text.slice(0, at)),
      element("mark", { text: span }),
      document.createTextNode(text.slice(at + span.length)),
    );
  }

  async function showChunk(projectId, chunkId, citation, chip) {
    const request = ++state.chunkRequest;
    for (const other of document.querySelectorAll(".chip.active")) other.classList.remove("active");
    chip.classList.add("active");
    ui.chunkPanel.hidden = false;
    ui.chunkPanel.dataset.state = "loading";
    ui.chunkPanel.dataset.chunkId = chunkId;
    ui.chunkDocument.textContent = citation && citation.document_name ? String(citation.document_name) : chunkId;
    ui.chunkMeta.textContent = "Loading…";
    clear(ui.chunkText);
    try {
      const chunk = await api("GET", `${projectPath(projectId)}/chunks/${encodeURIComponent(chunkId)}`);
      if (request !== state.chunkRequest) return;
      ui.chunkDocument.textContent = String(chunk.document_name);
      ui.chunkMeta.textContent = `chunk ${chunk.index ?? "?"} of document ${chunk.document_id ?? "?"} · ${chunk.chunk_id}`;
      renderChunkText(String(chunk.text), citation && citation.span ? String(citation.span) : "");
      ui.chunkPanel.dataset.state = "loaded";
    } catch (error) {
      if (request !== state.chunkRequest) return;
      ui.chunkMeta.textContent = errorText(error);
      ui.chunkPanel.dataset.state = "error";
    }
  }

  // --- search -----------------------------------------------------------------------------------

  async function search(event) {
    event.preventDefault();
    if (state.busy) return;
    const query = ui.question.value.trim();
    const projectId = ui.project.value;
    if (!state.key || !projectId) {
      showStatus("Enter an API key and pick a project first.", "error");
      return;
    }
    if (!query) {
      showStatus("Type a question first.", "error");
      return;
    }
    resetResults();
    const retrievalId = newRetrievalId();
    ui.app.dataset.retrievalId = retrievalId;
    setBusy(true);
    let outcome = "done";
    const stream = await openStream(projectId, retrievalId);
    try {
      const result = await api("POST", "/retrieve", { query, project_id: projectId, retrieval_id: retrievalId });
      renderResult(result, projectId);
      if (stream) await stream.settled(SOCKET_LINGER_MS);
    } catch (error) {
      outcome = "error";
      showStatus(errorText(error), "error");
      if (stream) await stream.settled(500);
    } finally {
      if (stream) stream.close();
      setBusy(false);
      ui.app.dataset.state = outcome;
    }
  }

  // --- wiring -----------------------------------------------------------------------------------

  ui.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    useKey(ui.key.value);
  });
  ui.keyForget.addEventListener("click", forgetKey);
  ui.project.addEventListener("change", () => {
    state.projectId = ui.project.value;
    if (state.projectId) sessionStorage.setItem(PROJECT_STORE, state.projectId);
    updateSearchButton();
  });
  ui.searchForm.addEventListener("submit", search);
  ui.question.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) ui.searchForm.requestSubmit();
  });
  ui.chunkClose.addEventListener("click", closeChunk);

  const remembered = sessionStorage.getItem(KEY_STORE);
  if (remembered) {
    ui.key.value = remembered;
    useKey(remembered);
  }
})();
