// Every page: a signed-in page is never shown from the back/forward
// cache. The launch page (R-U4): poll the launch's status about once a
// second, show its progress, and fetch the .rdp file once the host took
// the session, without the user clicking again. No inline script: the
// CSP allows this file only.
(function () {
  "use strict";
  // A signed-in page (no-store) that the browser kept in its back/forward
  // cache anyway, as Chrome does, is loaded again when it is shown: after
  // sign-out, Back on a shared computer shows the sign-in page, not her
  // desktops and sessions.
  window.addEventListener("pageshow", function (e) {
    if (e.persisted && document.getElementById("signout")) { window.location.reload(); }
  });
  // The answer to her form (a logoff, a disconnect) takes the focus her
  // click left on a page that is gone: a screen reader reads it out, and
  // her next Tab goes on from there rather than from the page's top.
  var flash = document.getElementById("flash");
  if (flash) { flash.focus(); }
  // Log off ends the session and whatever she had not saved in it: asked
  // first, in her language (the form's data-confirm), as Horizon's portal
  // asks. Without scripts the form posts at once.
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.dataset.confirm)) { e.preventDefault(); }
    });
  });
  var card = document.getElementById("launch");
  if (!card) { return; }
  var fetched = false;
  // setText changes an element's text only when it differs: the message
  // is a live region (role="status"), which a screen reader reads again
  // on every change.
  function setText(id, text) {
    var e = document.getElementById(id);
    if (e.textContent !== text) { e.textContent = text; }
  }
  function show(v) {
    card.dataset.state = v.state;
    setText("launch-title", v.title || "");
    document.title = (v.title ? v.title + " – " : "") + card.dataset.app;
    setText("launch-message", v.message || "");
    setText("launch-waited", v.waited || "");
    var progress = document.getElementById("launch-progress");
    progress.value = v.percent || 0;
    progress.hidden = v.state !== "waiting";
    var link = document.getElementById("launch-file");
    if (v.file) { link.href = v.file; link.hidden = false; }
  }
  function fetchFile(url) {
    if (fetched) { return; }
    fetched = true;
    window.location.assign(url);
  }
  // lost says the broker did not answer (or answered no status: a
  // database outage is a 503 page), until it answers again.
  function lost(yes) {
    setText("launch-note", yes ? card.dataset.lost : "");
  }
  function poll() {
    fetch(card.dataset.status, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) {
        // Sent to the sign-in page: the sign-in ended. Loading the page
        // again shows it, and brings her back here once signed in.
        if (r.redirected) { window.location.reload(); return null; }
        if (!r.ok && r.status !== 404) { throw new Error("status " + r.status); }
        return r.json();
      })
      .then(function (v) {
        if (!v) { return; }
        lost(false);
        show(v);
        if (v.state === "ready" && v.file) { fetchFile(v.file); return; }
        if (v.state === "waiting") { setTimeout(poll, 1000); }
      })
      .catch(function () { lost(true); setTimeout(poll, 3000); });
  }
  if (card.dataset.state === "ready" && card.dataset.file) {
    fetchFile(card.dataset.file);
  } else if (card.dataset.state === "waiting") {
    setTimeout(poll, 500);
  }
})();
