// The admin's graph view: one node's neighbourhood drawn with Cytoscape.js, expanded node by node.
// The server sends each group of neighbours (relationship, direction, label) one page at a time; a group
// with more than a page ends in a "more" node that fetches the next page, so a hub never arrives whole.
// New neighbours are placed on a spiral beside the node they came from (no global re-layout), which keeps
// an expansion cheap however large the graph already is.
(function () {
  "use strict";

  var COLOURS = {
    Project: "#444444", Document: "#1f77b4", Chunk: "#9ecae1", Entity: "#ff7f0e", Community: "#2ca02c",
    Conversation: "#9467bd", Memory: "#c5b0d5", ConversationSummary: "#8c564b", Fact: "#e377c2",
    Preference: "#f7b6d2", UserProfile: "#7f7f7f", Session: "#17becf", Event: "#bcbd22"
  };
  var root = JSON.parse(document.getElementById("graph-root").textContent);
  var urls = JSON.parse(document.getElementById("graph-urls").textContent);
  var status = document.getElementById("graph-status");
  var selected = document.getElementById("graph-selected");
  var expanded = {};   // node key -> {groups: {group key -> group state}}
  var placed = {};     // node key -> neighbours placed around it so far
  var pending = 0;
  var shownKey = null; // the node the side panel describes
  var problem = "";    // the last request's failure, shown until a request succeeds

  function key(node) { return node.label + ":" + node.id; }

  var cy = cytoscape({
    container: document.getElementById("graph-canvas"),
    minZoom: 0.05,
    maxZoom: 4,
    wheelSensitivity: 0.3,
    style: [
      { selector: "node", style: {
        "background-color": "data(colour)", "label": "data(caption)", "font-size": 9, "color": "#222",
        "text-valign": "bottom", "text-margin-y": 3, "text-wrap": "ellipsis", "text-max-width": 120,
        "width": 18, "height": 18 } },
      { selector: "node.root", style: { "width": 30, "height": 30, "border-width": 3, "border-color": "#000" } },
      { selector: "node.expanded", style: { "border-width": 2, "border-color": "#333" } },
      { selector: "node.more", style: {
        "shape": "round-rectangle", "background-color": "#dddddd", "width": 26, "height": 14,
        "font-style": "italic", "color": "#555" } },
      { selector: "node:selected", style: { "border-width": 3, "border-color": "#d62728" } },
      { selector: "edge", style: {
        "width": 1, "line-color": "#bbb", "target-arrow-color": "#bbb", "target-arrow-shape": "triangle",
        "arrow-scale": 0.6, "curve-style": "straight" } },
      { selector: "edge.walk", style: { "line-style": "dashed", "target-arrow-shape": "none" } }
    ]
  });

  function setStatus() {
    var shown = cy.nodes().not(".more").length;
    status.textContent = (problem ? problem + " · " : "") + (pending ? "loading… " : "") + shown + " node" + (shown === 1 ? "" : "s") + " shown";
  }

  function neighboursUrl(node, group, after) {
    var url = urls.neighbours.replace("LABEL", encodeURIComponent(node.label))
      .replace("ID", encodeURIComponent(node.id));
    var query = [];
    if (group) { query.push("group=" + encodeURIComponent(group)); }
    if (after) { query.push("after=" + encodeURIComponent(after)); }
    return url + (query.length ? "?" + query.join("&") : "");
  }

  // a request that counts as pending until `then` has drawn its answer (the caller's `finally` ends it)
  function fetchJson(url) {
    pending += 1;
    setStatus();
    return fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) { throw new Error((body.error && body.error.message) || response.statusText); }
          return body;
        });
      });
  }

  function done() { pending -= 1; setStatus(); }

  // the next free place on a spiral beside `around`, pointing away from the root
  function nextPosition(aroundKey) {
    var around = cy.getElementById(aroundKey);
    var centre = around.position();
    var origin = cy.nodes(".root").position() || centre;
    var dx = centre.x - origin.x, dy = centre.y - origin.y, length = Math.sqrt(dx * dx + dy * dy);
    var offset = length > 1 ? 60 : 0;
    var cx = centre.x + (length > 1 ? dx / length * offset : 0);
    var cyy = centre.y + (length > 1 ? dy / length * offset : 0);
    var i = (placed[aroundKey] || 0) + 1;
    placed[aroundKey] = i;
    var radius = 55 + 24 * Math.sqrt(i), angle = i * 2.39996;
    return { x: cx + radius * Math.cos(angle), y: cyy + radius * Math.sin(angle) };
  }

  function addNode(node, aroundKey) {
    var k = key(node);
    var existing = cy.getElementById(k);
    if (existing.nonempty()) { return existing; }
    return cy.add({
      group: "nodes",
      data: { id: k, node: node, caption: node.caption, colour: COLOURS[node.label] || "#999" },
      position: aroundKey ? nextPosition(aroundKey) : { x: 0, y: 0 }
    });
  }

  function addEdge(fromKey, toKey, type, walk) {
    var id = fromKey + "|" + type + "|" + toKey;
    if (cy.getElementById(id).nonempty()) { return; }
    cy.add({ group: "edges", data: { id: id, source: fromKey, target: toKey, type: type },
             classes: walk ? "walk" : "" });
  }

  function moreKey(parentKey, groupKey) { return "more|" + parentKey + "|" + groupKey; }

  function addGroupPage(parentKey, group) {
    var state = expanded[parentKey].groups[group.key] ||
      (expanded[parentKey].groups[group.key] = { group: group, loaded: 0 });
    state.total = group.total;
    state.after = group.after;
    group.nodes.forEach(function (node) {
      addNode(node, parentKey);
      var walk = group.outgoing === null;
      if (group.outgoing === false) { addEdge(key(node), parentKey, group.type, walk); }
      else { addEdge(parentKey, key(node), group.type || group.key, walk); }
    });
    state.loaded += group.nodes.length;
    var more = cy.getElementById(moreKey(parentKey, group.key));
    if (state.after) {
      var caption = "+" + (state.total - state.loaded).toLocaleString() + " more " + group.title;
      if (more.empty()) {
        more = cy.add({ group: "nodes", classes: "more", selectable: false,
          data: { id: moreKey(parentKey, group.key), caption: caption, colour: "#ddd",
                  more: { parent: parentKey, group: group.key } },
          position: nextPosition(parentKey) });
        addEdge(parentKey, more.id(), "more", true);
      } else {
        more.data("caption", caption);
      }
    } else if (more.nonempty()) {
      cy.remove(more);
    }
  }

  function expand(nodeKey) {
    var element = cy.getElementById(nodeKey);
    if (element.empty() || expanded[nodeKey]) { return Promise.resolve(); }
    var node = element.data("node");
    expanded[nodeKey] = { groups: {} };
    element.addClass("expanded");
    return fetchJson(neighboursUrl(node)).then(function (body) {
      problem = "";
      body.groups.forEach(function (group) { addGroupPage(nodeKey, group); });
      if (cy.nodes().length <= 400) { fit(); }
      if (shownKey === nodeKey) { show(element); }
    }).catch(function (error) {
      delete expanded[nodeKey];
      element.removeClass("expanded");
      problem = "could not expand: " + error.message;
    }).finally(done);
  }

  function loadMore(parentKey, groupKey) {
    var state = expanded[parentKey] && expanded[parentKey].groups[groupKey];
    if (!state || !state.after) { return Promise.resolve(); }
    var node = cy.getElementById(parentKey).data("node");
    var after = state.after;
    state.after = null;  // one request per page, however often the node is clicked
    return fetchJson(neighboursUrl(node, groupKey, after)).then(function (body) {
      problem = "";
      body.groups.forEach(function (group) { addGroupPage(parentKey, group); });
      if (shownKey === parentKey) { show(cy.getElementById(parentKey)); }
    }).catch(function (error) {
      state.after = after;
      problem = "could not load more: " + error.message;
    }).finally(done);
  }

  // the whole picture in view, never magnified beyond 1.5 (a few nodes would otherwise fill the canvas)
  function fit() {
    cy.resize();
    cy.fit(undefined, 30);
    if (cy.zoom() > 1.5) { cy.zoom(1.5); cy.center(); }
  }

  function cell(text) { var td = document.createElement("td"); td.textContent = text; return td; }

  function link(text, href) { var a = document.createElement("a"); a.href = href; a.textContent = text; return a; }

  function button(text, onClick) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "button";
    b.textContent = text;
    b.addEventListener("click", onClick);
    return b;
  }

  // the side panel: what the node is, where to go from it, and its groups with what is loaded of each
  function show(element) {
    selected.textContent = "";
    var node = element.data("node");
    if (!node) { return; }
    var k = element.id();
    shownKey = k;
    var title = document.createElement("h3");
    title.textContent = node.label + ": " + node.caption;
    selected.appendChild(title);
    var actions = document.createElement("p");
    if (!expanded[k]) { actions.appendChild(button("Expand", function () { expand(k); })); }
    if (node.kind) {
      actions.appendChild(document.createTextNode(" "));
      actions.appendChild(link("detail page", urls.detail.replace("KIND", node.kind)
        .replace("ID", encodeURIComponent(node.id))));
    }
    if (node.label !== "Project") {
      actions.appendChild(document.createTextNode(" · "));
      actions.appendChild(link("centre graph here", urls.graph.replace("LABEL", node.label)
        .replace("ID", encodeURIComponent(node.id))));
    }
    selected.appendChild(actions);
    if (expanded[k]) {
      Object.keys(expanded[k].groups).forEach(function (groupKey) {
        var state = expanded[k].groups[groupKey];
        var row = document.createElement("div");
        row.className = "group";
        row.dataset.group = groupKey;
        var text = document.createElement("span");
        text.textContent = state.group.title + ": " + state.loaded.toLocaleString() + " of " +
          state.total.toLocaleString();
        row.appendChild(text);
        if (state.after) { row.appendChild(button("more", function () { loadMore(k, groupKey); })); }
        selected.appendChild(row);
      });
    }
    var table = document.createElement("table");
    Object.keys(node.properties).forEach(function (name) {
      var tr = document.createElement("tr");
      var th = document.createElement("th");
      th.textContent = name;
      tr.appendChild(th);
      var value = node.properties[name];
      tr.appendChild(cell(typeof value === "object" ? JSON.stringify(value) : String(value)));
      table.appendChild(tr);
    });
    selected.appendChild(table);
  }

  cy.on("tap", "node", function (event) {
    var element = event.target;
    var more = element.data("more");
    if (more) { loadMore(more.parent, more.group); return; }
    cy.nodes().unselect();
    element.select();
    show(element);
  });
  cy.on("dbltap", "node", function (event) {
    if (!event.target.data("more")) { expand(event.target.id()); }
  });

  var legend = document.getElementById("graph-legend");
  Object.keys(COLOURS).forEach(function (label) {
    var span = document.createElement("span");
    var dot = document.createElement("i");
    dot.style.background = COLOURS[label];
    span.appendChild(dot);
    span.appendChild(document.createTextNode(label));
    legend.appendChild(span);
  });

  // the root arrives with the page, its groups' first pages included
  var rootElement = addNode(root.node, null);
  rootElement.addClass("root expanded");
  var rootKey = key(root.node);
  expanded[rootKey] = { groups: {} };
  root.groups.forEach(function (group) { addGroupPage(rootKey, group); });
  fit();
  // the page settles its layout after this script (fonts, scroll bars): Cytoscape must learn the size
  if (window.ResizeObserver) { new ResizeObserver(function () { cy.resize(); }).observe(cy.container()); }
  window.addEventListener("load", fit);
  rootElement.select();
  show(rootElement);
  setStatus();

  // for scripted use (and the browser tests): the Cytoscape instance and the two actions
  window.curationGraph = { cy: cy, expand: expand, loadMore: loadMore, key: key,
                           pending: function () { return pending; } };
}());
