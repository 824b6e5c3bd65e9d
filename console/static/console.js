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
          if (!fresh || fresh.innerHTML === el.innerHTML) return;
          // Ticked boxes (hosts picked to drain together) stay ticked.
          var kept = {};
          el.querySelectorAll("input[data-keep]:checked").forEach(function (box) { kept[box.name + "=" + box.value] = true; });
          el.innerHTML = fresh.innerHTML;
          el.querySelectorAll("input[data-keep]").forEach(function (box) {
            if (kept[box.name + "=" + box.value]) box.checked = true;
          });
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

  // Ask before ending a user's session, removing a host, deleting a pool
  // or an application group, removing an application, deleting a global
  // entitlement or removing one of its members.
  var asks = {
    "logoff": function () { return "Log off this user's session? Unsaved work in it is lost."; },
    "remove-host": function (btn) { return "Remove " + btn.dataset.host + "? Its agent's credential is revoked: it must register again to come back."; },
    "delete-pool": function (btn) { return "Delete host pool " + btn.dataset.pool + "?"; },
    "delete-appgroup": function (btn) { return "Delete application group " + btn.dataset.group + "? Those it alone entitles can no longer open what it publishes; a RemoteApp group's applications go with it."; },
    "remove-app": function (btn) { return "Remove application " + btn.dataset.app + "? Nobody can open it any more."; },
    "delete-globalentitlement": function (btn) { return "Delete global entitlement " + btn.dataset.entitlement + " from the federation document of every pod? Nobody connects through it any more."; },
    "remove-member": function (btn) { return "Remove member " + btn.dataset.member + "? No new session is placed there through this entitlement."; }
  };
  document.addEventListener("submit", function (ev) {
    var btn = ev.submitter;
    var ask = btn && asks[btn.dataset.action];
    if (ask && !window.confirm(ask(btn))) {
      ev.preventDefault();
    }
  });

  // Copy buttons: data-copy names the input whose value they copy.
  document.querySelectorAll("button[data-copy]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var field = document.getElementById(btn.dataset.copy);
      if (!field) return;
      var done = function () { btn.textContent = "Copied"; btn.dataset.copied = "1"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(field.value).then(done, function () { btn.textContent = "Select and copy it"; field.select(); });
        return;
      }
      // Plain HTTP to a name other than localhost: no clipboard API.
      field.select();
      if (document.execCommand && document.execCommand("copy")) done(); else btn.textContent = "Press Ctrl+C";
    });
  });
})();
