/* The assistant page: plain JavaScript, no build step.
 *
 * Talks to the assistant API (POST conversations/, POST conversations/<id>/messages/,
 * GET runs/<id>/) and the tool-call endpoints (GET calls/<id>/, POST calls/<id>/approve/
 * and deny/), all under the API base in data-api.  Every text from the server is put in
 * with textContent, never as HTML.
 */
(function () {
  "use strict";

  var root = document.getElementById("assistant");
  if (!root) { return; }
  var api = root.getAttribute("data-api") || "/api/";
  var approvalsUrl = root.getAttribute("data-approvals");
  var canApprove = root.getAttribute("data-can-approve") === "1";
  var T = JSON.parse(document.getElementById("webfetch-strings").textContent || "{}");
  var form = document.getElementById("chat-form");
  var input = document.getElementById("chat-input");
  var log = document.getElementById("chat-log");
  var statusEl = document.getElementById("chat-status");
  var provider = document.getElementById("provider");
  var conversation = null;
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
    item.querySelector(".webfetch-tool").textContent = pick(call, ["tool", "name"]) || "";
    item.querySelector(".webfetch-state").textContent = (T.states || {})[state] || state;
    var refused = state === "failed" || state === "denied" || state === "expired" ||
      state === "cancelled";
    if (refused && !item.getAttribute("data-reason")) {
      showReason(item, pick(call, ["reason", "error"]));
    }
    if (refused && !item.getAttribute("data-loaded")) {
      // The stored result names the guard's rule (more precise than the error code).
      item.setAttribute("data-loaded", "1");
      request("GET", api + "calls/" + pick(call, ["id"]) + "/").then(function (data) {
        var meta = (data && data.result && data.result.meta) || {};
        if (meta.reason) { showReason(item, meta.reason); }
      }).catch(function () {});
    }
    if (state === "succeeded" && !item.getAttribute("data-loaded")) {
      item.setAttribute("data-loaded", "1");
      showResult(item, call);
    }
    return state;
  }

  function showReason(item, code) {
    if (!code) { return; }
    item.setAttribute("data-reason", code);
    item.querySelector(".webfetch-reason").textContent =
      " — " + fmt(T.refused, { reason: plainReason(code) });
  }

  function showResult(item, call) {
    var id = pick(call, ["id", "call", "call_id"]);
    request("GET", api + "calls/" + id + "/").then(function (data) {
      var result = data && data.result;
      var text = result && result.content;
      if (!text) { return; }
      var tool = data.tool || "";
      item.appendChild(fencedBox(text));
    }).catch(function () { /* the call's text is optional; its state is shown */ });
  }

  function runCalls(run) {
    var calls = [];
    (run.steps || []).forEach(function (step) {
      (step.tool_calls || []).forEach(function (call) { calls.push(call); });
    });
    return calls;
  }

  // Fenced tool output quoted in an answer is collapsed and marked as third-party content.
  var FENCED = /(?:The text below is reference material[\s\S]*?)?<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=([0-9a-f]+)>>>[\s\S]*?<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce=\1>>>/g;

  function fencedBox(text) {
    var source = /Source URL \(untrusted\): (\S+)/.exec(text);
    var url = source ? source[1] : "";
    // Our own header (before the fence) says whether this is one of the site's pages.
    var header = text.split("<<<BEGIN UNTRUSTED")[0];
    var own = /^Status: (published page \d+|this site's published pages)$/m.test(header);
    var details = el("details", own ? "webfetch-fenced is-own" : "webfetch-fenced is-third-party");
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

  function renderRun(turn, run) {
    setProvider(run);
    var calls = runCalls(run);
    var waiting = false;
    var running = false;
    calls.forEach(function (call) {
      var state = renderCall(turn, call);
      if (state === "awaiting_approval") { waiting = true; }
      if (FINISHED_CALL.indexOf(state) < 0 && state !== "awaiting_approval") { running = true; }
    });
    var state = String(pick(run, ["state", "status"]) || "");
    var message = pick(run, ["final_message", "message", "answer", "final"]);
    var cut = Boolean(run.incomplete || (message && message.incomplete));
    if (message && typeof message === "object") { message = pick(message, ["content", "text"]); }
    var answer = turn.querySelector(".webfetch-answer");
    if (message && answer.getAttribute("data-text") !== String(message)) {
      answer.setAttribute("data-text", String(message));
      renderAnswer(answer, String(message));
      if (cut) { answer.appendChild(el("p", "webfetch-incomplete", T.incomplete)); }
    }
    var progress = turn.querySelector(".webfetch-progress");
    var finished = ["completed", "failed", "cancelled"].indexOf(state) >= 0;
    if (finished) {
      if (state === "failed" && run.error_message && !message) {
        answer.textContent = "";
        answer.appendChild(el("p", "webfetch-error", run.error_message));
      }
      progress.textContent = state === "failed" ? T.failed :
        state === "cancelled" ? T.cancelled : T.done;
      progress.classList.add("is-finished");
      progress.classList.remove("is-busy");
    } else {
      progress.textContent = waiting || state === "waiting_for_approval" ? T.waiting : T.thinking;
      progress.classList.add("is-busy");
    }
    turn.setAttribute("data-state", state);
    return finished;
  }

  function follow(turn, runId) {
    var delay = 500;
    function poll() {
      request("GET", api + "runs/" + runId + "/").then(function (run) {
        if (renderRun(turn, run)) {
          setStatus("");
          return;
        }
        delay = Math.min(delay * 1.3, 2000);
        window.setTimeout(poll, delay);
      }).catch(function () {
        window.setTimeout(poll, 3000);
      });
    }
    poll();
  }

  function ensureConversation() {
    if (conversation) { return Promise.resolve(conversation); }
    var body = {};
    var context = document.getElementById("page-context");
    if (context) { body.title = context.textContent.trim().slice(0, 200); }
    return request("POST", api + "conversations/", body).then(function (data) {
      conversation = pick(data, ["id", "pk"]);
      return conversation;
    });
  }

  function send(text) {
    addUserTurn(text);
    var turn = addRunTurn();
    setStatus(T.sending);
    ensureConversation().then(function (id) {
      return request("POST", api + "conversations/" + id + "/messages/", { content: text });
    }).then(function (data) {
      var run = pick(data, ["run"]) || data;
      var runId = typeof run === "object" ? pick(run, ["id", "run_id"]) : run;
      if (typeof run === "object") { renderRun(turn, run); }
      setStatus("");
      follow(turn, runId);
    }).catch(function (error) {
      var progress = turn.querySelector(".webfetch-progress");
      progress.textContent = T.error + (error && error.message ? " (" + error.message + ")" : "");
      progress.classList.remove("is-busy");
      setStatus(T.error);
    });
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
