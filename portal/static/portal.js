// The launch page (R-U4): poll the launch's status about once a second,
// show its progress, and fetch the .rdp file once the host took the
// session, without the user clicking again. No inline script: the CSP
// allows this file only.
(function () {
  "use strict";
  var card = document.getElementById("launch");
  if (!card) { return; }
  var fetched = false;
  function show(v) {
    card.dataset.state = v.state;
    document.getElementById("launch-title").textContent = v.title || "";
    document.getElementById("launch-message").textContent = v.message || "";
    document.getElementById("launch-waited").textContent = v.waited || "";
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
  function poll() {
    fetch(card.dataset.status, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (v) {
        show(v);
        if (v.state === "ready" && v.file) { fetchFile(v.file); return; }
        if (v.state === "waiting") { setTimeout(poll, 1000); }
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  if (card.dataset.state === "ready" && card.dataset.file) {
    fetchFile(card.dataset.file);
  } else if (card.dataset.state === "waiting") {
    setTimeout(poll, 500);
  }
})();
