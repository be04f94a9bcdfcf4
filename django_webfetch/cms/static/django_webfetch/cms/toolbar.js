/* The django CMS toolbar's live badges (cms_toolbars.py): the calls waiting for this
 * approver and the editor's answers that arrived after an approval.  Reads the status URL
 * every 10 s, and at once when the assistant page dispatches "webfetch:changed". */
(function () {
  "use strict";

  var box = document.getElementById("webfetch-badges");
  if (!box || box.getAttribute("data-live") === "1") { return; }
  box.setAttribute("data-live", "1");
  var url = box.getAttribute("data-status");

  function show(link, count) {
    if (!link || count === null || count === undefined) { return; }
    var forms = String(link.getAttribute("data-forms") || "").split("|");
    var form = count === 1 ? forms[0] : (forms[1] || forms[0]);
    link.textContent = String(form).replace("%(count)d", String(count));
    link.setAttribute("data-count", String(count));
    link.classList.toggle("cms-btn-action", count > 0);
    if (link.classList.contains("webfetch-answers")) { link.hidden = count === 0; }
  }

  var busy = false;
  function refresh() {
    if (busy) { return; }
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        busy = false;
        if (!data) { return; }
        show(box.querySelector(".webfetch-waiting"), data.approvals);
        show(box.querySelector(".webfetch-answers"), data.answers);
      })
      .catch(function () { busy = false; });
  }

  document.addEventListener("webfetch:changed", refresh);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { refresh(); }
  });
  window.setInterval(function () { if (!document.hidden) { refresh(); } }, 10000);
})();
