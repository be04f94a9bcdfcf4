/* The assistant page: plain JavaScript, no build step.
 *
 * Talks to the assistant API (GET/POST conversations/, GET/PATCH/DELETE conversations/<id>/,
 * POST conversations/<id>/messages/, GET runs/<id>/) and the tool-call endpoints (GET
 * calls/<id>/, POST calls/<id>/approve/ and deny/), all under the API base in data-api.
 *
 * A run's progress is read from its event stream (docs/assistant.rst): Server-Sent Events
 * on runs/<id>/stream/ where the server offers them, otherwise long-polling
 * runs/<id>/events/?since=N&wait=25, which degrades to polling once a second against a
 * server that ignores ``wait``.  Every text from the server is put in with textContent,
 * never as HTML.
 */
(function () {
  "use strict";

  var root = document.getElementById("assistant");
  if (!root) { return; }
  // The page says it cannot work until this script runs (static files not served, no JS).
  var missing = document.getElementById("script-missing");
  if (missing) { missing.hidden = true; }
  var api = root.getAttribute("data-api") || "/api/";
  var approvalsUrl = root.getAttribute("data-approvals");
  var canApprove = root.getAttribute("data-can-approve") === "1";
  var T = JSON.parse(document.getElementById("webfetch-strings").textContent || "{}");
  var form = document.getElementById("chat-form");
  var input = document.getElementById("chat-input");
  var log = document.getElementById("chat-log");
  var statusEl = document.getElementById("chat-status");
  var provider = document.getElementById("provider");
  var streamTemplate = root.getAttribute("data-stream") || "";
  var conversation = null;
  var follower = null;
  // The conversation being opened: a message sent meanwhile waits for it (its render would
  // otherwise replace the new turn).
  var ready = Promise.resolve();
  var streamWorks = typeof window.EventSource === "function";
  var list = document.getElementById("conversation-list");
  var TERMINAL = ["completed", "failed", "cancelled"];
  var FINISHED_CALL = ["succeeded", "failed", "denied", "expired", "cancelled"];

  function fmt(text, values) {
    return String(text).replace(/%\((\w+)\)s/g, function (_, key) {
      return values[key] === undefined ? "" : String(values[key]);
    });
  }

  function csrf() {
    var field = form.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function request(method, url, body) {
    var options = {
      method: method,
      credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRFToken": csrf() }
    };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(url, options).then(function (response) {
      return response.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        if (!response.ok) {
          var error = new Error((data && data.detail) || response.statusText);
          error.data = data;
          throw error;
        }
        return data;
      });
    });
  }

  function pick(obj, keys) {
    for (var i = 0; obj && i < keys.length; i++) {
      if (obj[keys[i]] !== undefined && obj[keys[i]] !== null) { return obj[keys[i]]; }
    }
    return undefined;
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function plainReason(code) {
    code = String(code || "");
    var reasons = T.reasons || {};
    if (code.indexOf("address_class:") === 0) {
      return (reasons.address_class || code) + " (" + code.slice(14) + ")";
    }
    if (code.indexOf("http_") === 0) { return "HTTP " + code.slice(5); }
    return reasons[code] || code;
  }

  function setStatus(text) { statusEl.textContent = text || ""; }

  function setProvider(run) {
    var label = pick(run, ["provider_label", "provider"]);
    if (label && typeof label === "object") { label = pick(label, ["label", "name"]); }
    if (!label) { return; }
    var offline = pick(run, ["offline", "is_offline"]) || /offline/i.test(String(label));
    provider.textContent = fmt(T.provider, { label: offline ? T.offline : label });
    provider.setAttribute("data-label", String(label));
  }

  // -- one turn: the user's message and the run that answers it ------------------------------

  function addUserTurn(text) {
    var empty = document.getElementById("chat-empty");
    if (empty) { empty.remove(); }
    var item = el("li", "webfetch-turn webfetch-turn-user");
    item.appendChild(el("span", "webfetch-who", T.you));
    item.appendChild(el("p", "webfetch-text", text));
    log.appendChild(item);
  }

  function addRunTurn() {
    var item = el("li", "webfetch-turn webfetch-turn-assistant");
    item.appendChild(el("span", "webfetch-who", T.assistant));
    var progress = el("p", "webfetch-progress", T.thinking);
    progress.setAttribute("role", "status");
    item.appendChild(progress);
    item.appendChild(el("ul", "webfetch-calls"));
    var answer = el("div", "webfetch-answer");
    item.appendChild(answer);
    log.appendChild(item);
    return item;
  }

  function callItem(turn, call) {
    var list = turn.querySelector(".webfetch-calls");
    var id = String(pick(call, ["id", "call", "call_id"]));
    var item = list.querySelector('[data-call="' + id + '"]');
    if (!item) {
      item = el("li", "webfetch-call");
      item.setAttribute("data-call", id);
      item.appendChild(el("span", "webfetch-tool"));
      item.appendChild(el("span", "webfetch-target", " "));
      item.appendChild(el("span", "webfetch-state"));
      item.appendChild(el("span", "webfetch-reason"));
      list.appendChild(item);
      // The run lists calls without their arguments: show what the call asks for.
      request("GET", api + "calls/" + id + "/").then(function (data) {
        var target = callTarget(data || {});
        if (target) { item.querySelector(".webfetch-target").textContent = " " + target + " "; }
      }).catch(function () {});
    }
    return item;
  }

  function callTarget(call) {
    var args = pick(call, ["arguments", "args"]) || {};
    return pick(args, ["url", "path", "page_id", "query"]) || "";
  }

  function renderCall(turn, call) {
    var item = callItem(turn, call);
    var state = String(pick(call, ["state", "status"]) || "");
    item.className = "webfetch-call is-" + state;
    var tool = pick(call, ["tool", "name"]);
    if (tool) { item.querySelector(".webfetch-tool").textContent = tool; }
    item.setAttribute("data-state", state);
    showState(item, state, item.getAttribute("data-reason") || pick(call, ["reason", "error"]));
    var comment = pick(call, ["comment", "decision_comment"]);
    if (comment && state === "denied") { showComment(item, comment); }
    var unsuccessful = state === "failed" || state === "denied" || state === "expired" ||
      state === "cancelled";
    if (unsuccessful && !item.getAttribute("data-reason")) {
      showReason(item, pick(call, ["reason", "error"]));
    }
    if (unsuccessful && !item.getAttribute("data-loaded")) {
      // The stored result names the guard's rule (more precise than the error code), or
      // what failed on the way (``failure``: the network, TLS, the server).
      item.setAttribute("data-loaded", "1");
      request("GET", api + "calls/" + item.getAttribute("data-call") + "/").then(function (data) {
        var meta = (data && data.result && data.result.meta) || {};
        // The call's own stored reason: a state event may have come without one.
        var code = item.getAttribute("data-reason") || (data && data.reason);
        if (meta.reason) {
          showReason(item, meta.reason);
        } else if (meta.failure && !isRefusal(state, code)) {
          showReason(item, code, meta.failure);
        } else if (code && !item.getAttribute("data-reason")) {
          showReason(item, code);
        }
        if (data && data.state === "denied" && data.decision_comment) {
          showComment(item, data.decision_comment);
        }
      }).catch(function () {});
    }
    if (state === "succeeded" && !item.getAttribute("data-loaded")) {
      item.setAttribute("data-loaded", "1");
      showResult(item, call);
    }
    return state;
  }

  // A refusal (a rule or a person decided the call may not run: the guard, an approver,
  // nobody in time, a bound) is said "refused"; a call the guard allowed that then failed
  // on the way is said "failed" with what failed.  The codes of a refusal come from the
  // server (runs.reasons.REFUSALS).
  function isRefusal(state, code) {
    if (state === "denied" || state === "expired") { return true; }
    var head = String(code || "").split(":")[0];
    return state === "failed" && (T.refusals || []).indexOf(head) >= 0;
  }

  function showState(item, state, code) {
    var shown = state === "failed" && isRefusal(state, code) ? "refused" : state;
    item.querySelector(".webfetch-state").textContent = (T.states || {})[shown] || shown;
    item.classList.toggle("is-refused", isRefusal(state, code));
  }

  function showReason(item, code, failure) {
    if (!code) { return; }
    item.setAttribute("data-reason", code);
    showState(item, item.getAttribute("data-state") || "", code);
    var failures = T.failures || {};
    var text = plainReason(code);
    if (failure && failures[failure]) { text += ". " + failures[failure]; }
    item.querySelector(".webfetch-reason").textContent = " — " + text;
  }

  function showComment(item, comment) {
    var node = item.querySelector(".webfetch-comment");
    if (!node) {
      node = el("p", "webfetch-comment");
      item.appendChild(node);
    }
    node.textContent = fmt(T.denied_comment, { comment: comment });
  }

  function showResult(item, call) {
    var id = pick(call, ["id", "call", "call_id"]);
    request("GET", api + "calls/" + id + "/").then(function (data) {
      var result = data && data.result;
      var text = result && result.content;
      if (!text || item.querySelector(".webfetch-fenced")) { return; }
      var box = fencedBox(text);
      item.appendChild(box);
      hideQuoted(item.closest(".webfetch-turn"));
    }).catch(function () { /* the call's text is optional; its state is shown */ });
  }

  // A page's text quoted in the answer is shown once: there, not again under its call.
  function hideQuoted(turn) {
    if (!turn) { return; }
    var answer = turn.querySelector(".webfetch-answer");
    var quoted = answer ? answer.getAttribute("data-text") || "" : "";
    Array.prototype.forEach.call(turn.querySelectorAll(".webfetch-call > .webfetch-fenced"),
      function (box) {
        var nonce = box.getAttribute("data-nonce");
        box.hidden = Boolean(nonce && quoted.indexOf("nonce=" + nonce) >= 0);
      });
  }

  function runCalls(run) {
    var calls = [];
    (run.steps || []).forEach(function (step) {
      (step.tool_calls || []).forEach(function (call) { calls.push(call); });
    });
    return calls;
  }

  // Fenced tool output quoted in an answer is collapsed and marked as where it came from.
  var FENCED = /(?:The text below is reference material[\s\S]*?)?<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=([0-9a-f]+)>>>[\s\S]*?<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce=\1>>>/g;

  function fencedBox(text) {
    var source = /Source URL \(untrusted\): (\S+)/.exec(text);
    var url = source ? source[1] : "";
    var nonce = /<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=([0-9a-f]+)>>>/.exec(text);
    // Our own header (before the fence) says whether this is one of the site's pages.
    var header = text.split("<<<BEGIN UNTRUSTED")[0];
    var own = /^The text below is reference material from one of this site's own pages\.$/m
      .test(header);
    var details = el("details", own ? "webfetch-fenced is-own" : "webfetch-fenced is-third-party");
    if (nonce) { details.setAttribute("data-nonce", nonce[1]); }
    details.appendChild(el("summary", null, fmt(own ? T.own_page : T.third_party, { source: url })));
    details.appendChild(el("pre", null, text));
    return details;
  }

  function paragraphs(node, text) {
    text.split(/\n{2,}/).forEach(function (para) {
      if (para.trim()) { node.appendChild(el("p", null, para)); }
    });
  }

  function renderAnswer(node, text) {
    node.textContent = "";
    var last = 0;
    var match;
    FENCED.lastIndex = 0;
    while ((match = FENCED.exec(text)) !== null) {
      paragraphs(node, text.slice(last, match.index));
      node.appendChild(fencedBox(match[0]));
      last = FENCED.lastIndex;
    }
    paragraphs(node, text.slice(last));
  }

  function setProgress(turn, text, busy) {
    var progress = turn.querySelector(".webfetch-progress");
    progress.textContent = text;
    progress.hidden = !text;
    progress.classList.toggle("is-busy", Boolean(busy));
    progress.classList.toggle("is-finished", !busy);
  }

  function renderRun(turn, run) {
    setProvider(run);
    var calls = runCalls(run);
    var waiting = false;
    calls.forEach(function (call) {
      if (renderCall(turn, call) === "awaiting_approval") { waiting = true; }
    });
    var state = String(pick(run, ["state", "status"]) || "");
    var message = pick(run, ["final_message"]);
    var cut = Boolean(run.incomplete || (message && message.incomplete));
    if (message && typeof message === "object") { message = pick(message, ["content", "text"]); }
    var answer = turn.querySelector(".webfetch-answer");
    if (message && answer.getAttribute("data-text") !== String(message)) {
      answer.setAttribute("data-text", String(message));
      answer.classList.remove("is-streaming");
      renderAnswer(answer, String(message));
    }
    if (cut && state === "completed" && !answer.querySelector(".webfetch-incomplete")) {
      answer.appendChild(el("p", "webfetch-incomplete", T.incomplete));
    }
    hideQuoted(turn);
    var finished = TERMINAL.indexOf(state) >= 0;
    if (finished) {
      if (state === "failed" && !message) {
        answer.textContent = "";
        answer.classList.remove("is-streaming");
        answer.appendChild(el("p", "webfetch-error", run.error_message || T.failed));
      }
      // A completed run's answer speaks for itself; a failure or cancellation is said once.
      setProgress(turn, state === "failed" ? T.failed : state === "cancelled" ? T.cancelled : "",
        false);
    } else {
      setProgress(turn, waiting || state === "waiting_for_approval" ? T.waiting : T.thinking, true);
    }
    turn.setAttribute("data-state", state);
    turn.setAttribute("data-run", String(run.id || ""));
    return finished;
  }

  // -- following a run: its event stream ------------------------------------------------------

  function announce() {
    document.dispatchEvent(new CustomEvent("webfetch:changed"));
  }

  function streamUrl(run, runId) {
    if (run && run.stream_url) { return run.stream_url; }
    if (streamTemplate) { return streamTemplate.replace("00000000-0000-0000-0000-000000000000", runId); }
    return api + "runs/" + runId + "/stream/";
  }

  function follow(turn, run, since) {
    if (follower) { follower.stop(); }
    var runId = typeof run === "object" ? String(run.id) : String(run);
    var me = { stopped: false, source: null, timer: null, refreshing: null };
    me.stop = function () {
      me.stopped = true;
      if (me.source) { me.source.close(); }
      if (me.timer) { window.clearTimeout(me.timer); }
    };
    follower = me;
    var last = since || 0;
    var streamed = "";
    turn.setAttribute("data-run", runId);

    function refresh() {
      // The run's own record is the truth; events only say when to look again (one request
      // at a time, and one more when an event came in while it was under way).
      if (me.refreshing) { me.again = true; return; }
      me.again = false;
      me.refreshing = true;
      window.setTimeout(function () {
        request("GET", api + "runs/" + runId + "/").then(function (data) {
          me.refreshing = false;
          if (me.stopped) { return; }
          if (renderRun(turn, data)) { finish(); } else if (me.again) { refresh(); }
        }, function () {
          me.refreshing = false;
          if (me.again && !me.stopped) { refresh(); }
        });
      }, 120);
    }

    function finish() {
      me.stop();
      if (follower === me) { follower = null; }
      setStatus("");
      markSeen();
      loadConversations();
      announce();
    }

    function showStream() {
      var answer = turn.querySelector(".webfetch-answer");
      if (answer.getAttribute("data-text")) { return; }
      answer.classList.add("is-streaming");
      var node = answer.querySelector(".webfetch-streamed");
      if (!node) {
        answer.textContent = "";
        node = el("p", "webfetch-streamed");
        answer.appendChild(node);
      }
      node.textContent = streamed;
    }

    function handle(item) {
      if (!item || me.stopped) { return; }
      var seq = Number(item.seq || 0);
      if (seq && seq <= last) { return; }
      if (seq) { last = seq; }
      var data = item.data || {};
      switch (item.kind) {
        case "text_delta":
          streamed += String(data.text || "");
          showStream();
          return;
        case "call_requested":
        case "tool_call":
        case "call_state":
          streamed = "";
          renderCall(turn, { id: data.call, tool: data.tool, state: data.state, comment: data.comment });
          if (data.state === "awaiting_approval") { setProgress(turn, T.waiting, true); }
          announce();
          break;
        case "paused":
        case "waiting_for_approval":
          setProgress(turn, T.waiting, true);
          announce();
          break;
        case "resumed":
          setProgress(turn, T.thinking, true);
          announce();
          break;
        case "step":
          if (data.final === false) { streamed = ""; }
          break;
        case "provider_retry":
        case "worker_lost":
        case "released":
          // The step is asked again: its text so far is dropped.
          streamed = "";
          break;
        default:
          break;
      }
      refresh();
    }

    function parse(raw) {
      try { return JSON.parse(raw); } catch (e) { return null; }
    }

    function stream() {
      var opened = false;
      var source;
      try {
        source = new window.EventSource(streamUrl(run, runId) + "?since=" + last,
          { withCredentials: true });
      } catch (e) {
        streamWorks = false;
        return poll();
      }
      me.source = source;
      root.setAttribute("data-transport", "stream");
      var onEvent = function (event) {
        var item = parse(event.data);
        if (item && !item.kind) { item.kind = event.type; }
        handle(item);
      };
      ["message", "started", "run_started", "text_delta", "call_requested", "call_state",
        "tool_call", "tool_results", "step", "paused", "resumed", "waiting_for_approval",
        "waiting_for_tools", "provider_retry", "completed", "failed", "cancelled",
        "worker_lost", "released"].forEach(function (kind) { source.addEventListener(kind, onEvent); });
      source.onopen = function () { opened = true; };
      source.onerror = function () {
        if (me.stopped) { return; }
        if (source.readyState === window.EventSource.CLOSED) {
          // Refused (no stream endpoint here, not this server, or 429 too_many_open: this
          // user has too many streams open): long-poll instead.
          source.close();
          if (!opened) { streamWorks = false; }
          refresh();
          poll();
        }
        // Otherwise the browser reconnects by itself, sending Last-Event-ID.
      };
    }

    // Set while the server refuses long-polls (429 too_many_open): plain polls until then.
    var plainUntil = 0;

    function poll() {
      if (me.stopped) { return; }
      var plain = Date.now() < plainUntil;
      root.setAttribute("data-transport", plain ? "plain-poll" : "poll");
      var started = Date.now();
      request("GET", api + "runs/" + runId + "/events/?since=" + last + (plain ? "" : "&wait=25"))
        .then(function (data) {
          if (me.stopped) { return; }
          var events = (data && data.events) || [];
          events.forEach(handle);
          if (data && TERMINAL.indexOf(data.state) >= 0 && last >= Number(data.last_event || 0)) {
            refresh();
            return;
          }
          // An empty answer at once: this server ignores wait, so ask once a second.
          var quick = !events.length && Date.now() - started < 1000;
          me.timer = window.setTimeout(poll, quick || plain ? 1000 : 0);
        })
        .catch(function (error) {
          var data = error && error.data;
          if (data && data.code === "too_many_open") {
            // Too many waits open for this user: poll without waiting, and try a
            // long-poll again after the server's Retry-After.
            var after = Math.max(Number(data.retry_after) || 5, 1) * 1000;
            plainUntil = Date.now() + after;
            me.timer = window.setTimeout(poll, 1000);
            return;
          }
          me.timer = window.setTimeout(poll, 3000);
        });
    }

    if (streamWorks) { stream(); } else { poll(); }
    return me;
  }

  // -- conversations: the list, reopening one ------------------------------------------------

  function markSeen() {
    if (!conversation || document.hidden) { return; }
    request("PATCH", api + "conversations/" + conversation + "/", { seen: true })
      .then(announce).catch(function () {});
  }

  function clearLog() {
    log.textContent = "";
  }

  function showEmpty() {
    clearLog();
    log.appendChild(el("li", "webfetch-empty", T.empty));
    log.lastChild.id = "chat-empty";
  }

  function renderList(items) {
    if (!list) { return; }
    // Not under the editor's hands: a title being edited stays (the list is read again
    // when the rename is saved or abandoned).
    if (list.querySelector(".webfetch-rename-form")) { return; }
    list.textContent = "";
    if (!items.length) {
      list.appendChild(el("li", "webfetch-muted", T.no_conversations));
      return;
    }
    items.forEach(function (item) {
      var id = String(item.id);
      var li = el("li", "webfetch-conversation" + (id === String(conversation) ? " is-current" : ""));
      li.setAttribute("data-conversation", id);
      var open = el("button", "webfetch-open", item.title || T.untitled);
      open.type = "button";
      if (id === String(conversation)) { open.setAttribute("aria-current", "true"); }
      open.addEventListener("click", function () { openConversation(id); });
      var rename = el("button", "webfetch-rename", T.rename);
      rename.type = "button";
      rename.setAttribute("aria-label", fmt(T.rename_label, { title: item.title || T.untitled }));
      rename.addEventListener("click", function () { startRename(li, item); });
      var remove = el("button", "webfetch-delete", T["delete"]);
      remove.type = "button";
      remove.setAttribute("aria-label", fmt(T.delete_label, { title: item.title || T.untitled }));
      remove.addEventListener("click", function () { removeConversation(item); });
      li.appendChild(open);
      li.appendChild(rename);
      li.appendChild(remove);
      list.appendChild(li);
    });
  }

  function startRename(li, item) {
    var formEl = el("form", "webfetch-rename-form");
    var field = el("input");
    field.type = "text";
    field.maxLength = 200;
    field.value = item.title || "";
    field.setAttribute("aria-label", T.new_title);
    var save = el("button", null, T.save);
    save.type = "submit";
    // Cancel (or Escape) leaves the title as it was.
    var cancel = el("button", "webfetch-rename-cancel", T.cancel);
    cancel.type = "button";
    cancel.addEventListener("click", function () { formEl.remove(); loadConversations(); });
    formEl.appendChild(field);
    formEl.appendChild(save);
    formEl.appendChild(cancel);
    li.textContent = "";
    li.appendChild(formEl);
    field.focus();
    field.select();
    formEl.addEventListener("submit", function (event) {
      event.preventDefault();
      save.disabled = true;
      request("PATCH", api + "conversations/" + item.id + "/", { title: field.value })
        .then(function () { formEl.remove(); return loadConversations(); })
        .catch(function (error) {
          save.disabled = false;
          li.appendChild(el("p", "webfetch-error", error.message || T.error));
        });
    });
    field.addEventListener("keydown", function (event) {
      if (event.key === "Escape") { formEl.remove(); loadConversations(); }
    });
  }

  function removeConversation(item) {
    if (!window.confirm(fmt(T.delete_confirm, { title: item.title || T.untitled }))) { return; }
    request("DELETE", api + "conversations/" + item.id + "/").then(function () {
      if (String(item.id) === String(conversation)) {
        if (follower) { follower.stop(); follower = null; }
        conversation = null;
        showEmpty();
      }
      return loadConversations();
    }).catch(function (error) { setStatus(error.message || T.error); });
  }

  function loadConversations() {
    if (!list) { return Promise.resolve([]); }
    return request("GET", api + "conversations/?limit=50").then(function (data) {
      var items = (data && (data.results || data)) || [];
      renderList(items);
      return items;
    }).catch(function () { return []; });
  }

  function lastUserTurn() {
    var turns = log.querySelectorAll(".webfetch-turn-user");
    return turns.length ? turns[turns.length - 1] : null;
  }

  function openConversation(id) {
    ready = loadConversation(id);
    return ready;
  }

  function loadConversation(id) {
    if (follower) { follower.stop(); follower = null; }
    conversation = id;
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", "#conversation=" + id);
    }
    Array.prototype.forEach.call(list ? list.querySelectorAll(".webfetch-conversation") : [],
      function (li) {
        var current = li.getAttribute("data-conversation") === String(id);
        li.classList.toggle("is-current", current);
      });
    var context = document.getElementById("page-context");
    if (context) { context.remove(); }
    return request("GET", api + "conversations/" + id + "/").then(function (data) {
      clearLog();
      root.setAttribute("data-conversation", String(id));
      var turns = [];
      var byRun = {};
      (data.messages || []).forEach(function (message) {
        var run = message.run ? String(message.run) : "";
        if (message.role === "user") {
          addUserTurn(message.content);
          if (run && !byRun[run]) {
            byRun[run] = addRunTurn();
            byRun[run].setAttribute("data-run", run);
            turns.push([run, byRun[run]]);
          }
        }
      });
      if (!turns.length) { showEmpty(); }
      // The last turns come from their runs (calls with their current state, the answer);
      // older ones from their stored answer alone.
      var recent = turns.slice(-10);
      turns.slice(0, -10).forEach(function (pair) {
        var final = null;
        (data.messages || []).forEach(function (m) {
          if (String(m.run) === pair[0] && m.role === "assistant") { final = m; }
        });
        if (final) {
          renderAnswer(pair[1].querySelector(".webfetch-answer"), final.content);
        }
        setProgress(pair[1], "", false);
      });
      return Promise.all(recent.map(function (pair) {
        return request("GET", api + "runs/" + pair[0] + "/").then(function (run) {
          var finished = renderRun(pair[1], run);
          return { run: run, turn: pair[1], finished: finished };
        }).catch(function () { return null; });
      })).then(function (results) {
        var latest = results.length ? results[results.length - 1] : null;
        if (latest && !latest.finished && String(conversation) === String(id)) {
          follow(latest.turn, latest.run, 0);
        }
        markSeen();
        log.scrollIntoView({ block: "end" });
      });
    }).catch(function () {
      conversation = null;
      showEmpty();
    });
  }

  function ensureConversation() {
    if (conversation) { return Promise.resolve(conversation); }
    var body = {};
    var context = document.getElementById("page-context");
    if (context) { body.title = context.textContent.trim().slice(0, 200); }
    return request("POST", api + "conversations/", body).then(function (data) {
      conversation = pick(data, ["id", "pk"]);
      root.setAttribute("data-conversation", String(conversation));
      if (window.history && window.history.replaceState) {
        window.history.replaceState(null, "", "#conversation=" + conversation);
      }
      return conversation;
    });
  }

  function send(text) {
    setStatus(T.sending);
    ready = ready.then(function () { return sendNow(text); });
  }

  function sendNow(text) {
    var empty = document.getElementById("chat-empty");
    if (empty) { empty.remove(); }
    addUserTurn(text);
    var turn = addRunTurn();
    setStatus(T.sending);
    return ensureConversation().then(function (id) {
      return request("POST", api + "conversations/" + id + "/messages/", { content: text });
    }).then(function (data) {
      var run = pick(data, ["run"]) || data;
      if (typeof run === "object") { renderRun(turn, run); }
      setStatus("");
      follow(turn, run, 0);
      loadConversations();
    }).catch(function (error) {
      setProgress(turn, T.error + (error && error.message ? " (" + error.message + ")" : ""), false);
      setStatus(T.error);
    });
  }

  var newButton = document.getElementById("conversation-new");
  if (newButton) {
    newButton.addEventListener("click", function () {
      ready = ready.then(startNew);
    });
  }

  function startNew() {
    if (follower) { follower.stop(); follower = null; }
    conversation = null;
    root.removeAttribute("data-conversation");
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", window.location.pathname + window.location.search);
    }
    showEmpty();
    input.focus();
    return loadConversations();
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var text = input.value.trim();
    if (!text) { input.focus(); return; }
    input.value = "";
    input.removeAttribute("data-page");
    send(text);
    // The page context went with the first message (the conversation's title).
    var context = document.getElementById("page-context");
    if (context) { context.remove(); }
    input.focus();
  });

  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (form.requestSubmit) { form.requestSubmit(); } else { form.dispatchEvent(new Event("submit")); }
    }
  });

  // On load: the conversation named in the address, else (unless the page was opened to ask
  // about a page) the editor's most recent one.
  var named = /#conversation=([0-9a-f-]{36})/.exec(window.location.hash);
  ready = loadConversations().then(function (items) {
    if (named) {
      return loadConversation(named[1]);
    }
    if (items.length && !document.getElementById("page-context")) {
      return loadConversation(String(items[0].id));
    }
    return null;
  });

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { markSeen(); }
  });

  // -- approvals (for approvers): refresh the cards, decide through the call endpoints -------

  var approvals = document.getElementById("approvals");

  function refreshApprovals() {
    if (!approvals || !approvalsUrl) { return Promise.resolve(); }
    if (approvals.contains(document.activeElement) && document.activeElement.tagName === "INPUT") {
      return Promise.resolve();  // do not pull the comment field away from someone typing
    }
    return fetch(approvalsUrl, { credentials: "same-origin" }).then(function (response) {
      return response.ok ? response.text() : null;
    }).then(function (html) {
      if (html !== null && html !== undefined && approvals.innerHTML.trim() !== html.trim()) {
        approvals.innerHTML = html;  // server-rendered by our own template (escaped there)
        announce();  // the toolbar's counter follows the cards
      }
    }).catch(function () {});
  }

  if (approvals) {
    approvals.addEventListener("submit", function (event) {
      event.preventDefault();
      var formEl = event.target;
      var button = event.submitter || formEl.querySelector("button[value=approve]");
      var url = button.getAttribute("formaction");
      var comment = formEl.querySelector("input[name=comment]");
      var card = formEl.closest(".webfetch-card");
      Array.prototype.forEach.call(formEl.querySelectorAll("button"), function (b) { b.disabled = true; });
      request("POST", url, { comment: comment ? comment.value : "" }).then(function () {
        if (card) {
          card.appendChild(el("p", "webfetch-decided",
            button.value === "approve" ? T.approved_note : T.denied_note));
        }
        window.setTimeout(refreshApprovals, 600);
      }).catch(function (error) {
        if (card) { card.appendChild(el("p", "webfetch-error", error.message || T.error)); }
        Array.prototype.forEach.call(formEl.querySelectorAll("button"), function (b) { b.disabled = false; });
      });
    });
    window.setInterval(refreshApprovals, 3000);
  }

  if (canApprove && window.location.hash === "#approvals" && approvals) {
    var first = approvals.querySelector("button, input");
    if (first) { first.focus(); }
  }
})();
