// vdibroker console: refresh the live parts of the page (elements with
// data-live and an id) every few seconds by fetching the same page and
// swapping those elements. Forms outside live parts are never touched, so
// typing into the settings form is safe. No framework, no build step.
(function () {
  "use strict";
  var seconds = parseInt(document.body.dataset.refresh || "5", 10);
  var badge = document.getElementById("live");
  var busy = false;

  function refresh() {
    if (busy || document.hidden) return;
    if (!document.querySelector("[data-live]")) return;
    // Do not replace a part while the user is pressing one of its buttons.
    var active = document.activeElement;
    if (active && active.closest && active.closest("[data-live]") && active.tagName !== "BODY") return;
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Console-Refresh": "1" } })
      .then(function (resp) {
        if (resp.redirected && new URL(resp.url).pathname === "/signin") {
          window.location.assign(resp.url);
          throw new Error("signed out");
        }
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        return resp.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
        });
        if (badge) { badge.classList.remove("stale"); badge.title = "Updated " + new Date().toLocaleTimeString(); }
      })
      .catch(function () { if (badge) badge.classList.add("stale"); })
      .finally(function () { busy = false; });
  }

  if (seconds > 0) window.setInterval(refresh, seconds * 1000);

  document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.submit(); });
  });

  // Ask before ending a user's session.
  document.addEventListener("submit", function (ev) {
    var btn = ev.submitter;
    if (btn && btn.dataset.action === "logoff" && !window.confirm("Log off this user's session? Unsaved work in it is lost.")) {
      ev.preventDefault();
    }
  });
})();
