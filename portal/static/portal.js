// Every page: a signed-in page is never shown from the back/forward
// cache. The home page: Log off asks in the page's dialog, and the
// sessions list refreshes itself after a logoff. The launch page (R-U4): poll the launch's status about once a
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
  // A session's "since" in her own time zone (the page says it in UTC,
  // which is what stays without scripts, and what the element's title
  // keeps): 02:28 UTC is 03:28 in Berlin, which she would have to work
  // out. Laid out as the page's UTC time is, 2026-12-07 03:28, in every
  // language: digits in that order read the same left to right on the
  // Arabic page too (the element is dir="ltr").
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  var localTimes = function (root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime()) || t.title) { return; }
      t.title = t.textContent;
      t.textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes());
    });
  };
  localTimes(document);
  // Log off ends the session and whatever she had not saved in it: asked
  // first, in her language (the form's data-confirm), in the page's own
  // dialog (showModal: the focus moves into it, on Cancel; Escape
  // cancels; the focus returns to her button). Not window.confirm, which
  // a browser told to "prevent this page from creating additional
  // dialogs" answers false at once: Log off did nothing. Her yes is the
  // form's confirm=yes; a form posted without it (no script, no dialog)
  // is answered with the confirmation page, so the broker asks either
  // way. Delegated: the refreshed list's forms are asked alike.
  var dialog = document.getElementById("logoff-dialog");
  var asking = null;
  // formOf is the Log off form of action in the page now: the list's
  // refresh (below) may have replaced the one she clicked while the
  // dialog asked, and a form no longer in the page posts nothing.
  var formOf = function (action) {
    return Array.prototype.find.call(document.querySelectorAll("form[data-confirm]"), function (f) {
      return f.getAttribute("action") === action;
    });
  };
  if (dialog && typeof dialog.showModal === "function") {
    document.addEventListener("submit", function (e) {
      var f = e.target;
      if (!f.matches || !f.matches("form[data-confirm]") || f.querySelector('input[name="confirm"]')) { return; }
      e.preventDefault();
      asking = f.getAttribute("action");
      document.getElementById("logoff-question").textContent = f.dataset.confirm;
      dialog.returnValue = "";
      dialog.showModal();
    });
    dialog.addEventListener("close", function () {
      // The close event is a task of its own: one of a dialog already
      // opened again (a quick second click) is not this question's.
      if (dialog.open) { return; }
      var f = asking && formOf(asking);
      asking = null;
      if (!f) { return; } // her session left the list meanwhile
      if (dialog.returnValue === "yes") {
        var yes = document.createElement("input");
        yes.type = "hidden"; yes.name = "confirm"; yes.value = "yes";
        f.appendChild(yes);
        f.submit();
      } else {
        f.querySelector("button").focus();
      }
    });
  }
  // After a logoff the session stays listed, "Logging off", until its
  // host has done it (its agent's next report), and so does each other
  // session she logged off (the page's ?off=, which its forms carry on):
  // the list is fetched again (/portal/sessions) after each of the
  // section's data-delays (seconds; a bounded number over about two
  // minutes), not while the tab is hidden, until those sessions are gone
  // (each leaves on its own, the others still "Logging off"); then, or
  // when the tries are spent, the status says so and the address loses
  // its ?off=.
  var sessions = document.getElementById("sessions");
  if (sessions && sessions.dataset.refresh) {
    var url = sessions.dataset.refresh;
    var delays = sessions.dataset.delays.split(",").map(Number);
    var tries = 0, timer = 0, paused = false, over = false;
    var remote = !!sessions.querySelector("tr[data-logging-off][data-pod]");
    var status = document.getElementById("sessions-status");
    var finish = function (done) {
      over = true;
      if (status) { status.textContent = done ? status.dataset.done : status.dataset.slow; }
      var u = new URL(window.location.href);
      u.searchParams.delete("off");
      window.history.replaceState(null, "", u.toString());
    };
    var next = function () {
      if (over) { return; }
      if (tries >= delays.length) { finish(false); return; }
      if (document.hidden) { paused = true; return; }
      timer = setTimeout(refresh, delays[tries] * 1000);
    };
    // The focus stays on the same button of the same session: not by
    // the button's id, which is its row's number, so that a row gone
    // above would give it to the next session's button.
    var swap = function (fresh) {
      var focused = document.activeElement;
      var row = focused && sessions.contains(focused) && focused.closest("tr[data-session]");
      var again = "";
      if (row && focused.classList.length) {
        again = "tr[data-session=\"" + CSS.escape(row.dataset.session) + "\"]" +
          (row.dataset.pod ? "[data-pod=\"" + CSS.escape(row.dataset.pod) + "\"]" : ":not([data-pod])") +
          " button." + CSS.escape(focused.classList[0]);
      }
      localTimes(fresh);
      sessions.replaceWith(fresh);
      sessions = fresh;
      var b = again && sessions.querySelector(again);
      if (b) { b.focus(); }
    };
    var refresh = function () {
      timer = 0;
      tries++;
      // The header asks for the list alone: without it (a navigation)
      // the address is her whole page.
      // A proxy that drops the header gets her whole page (the
      // address redirects there): its list is the same list.
      fetch(url, { credentials: "same-origin", headers: { "Portal-Fragment": "sessions" } })
        .then(function (r) {
          if (!r.ok) { throw new Error("status " + r.status); }
          return r.text().then(function (html) { return { html: html, redirected: r.redirected }; });
        })
        .then(function (got) {
          var fresh = new DOMParser().parseFromString(got.html, "text/html").getElementById("sessions");
          // Sent to the sign-in page: her sign-in ended; nothing more to
          // refresh here.
          if (!fresh && got.redirected) { over = true; return; }
          if (!fresh) { throw new Error("no sessions list"); }
          swap(document.importNode(fresh, true));
          // Gone from the list: logged off, unless it is another pod's
          // and some pod's sessions could not be read (it may be there).
          if (!sessions.querySelector("tr[data-logging-off]") && !(remote && sessions.querySelector("#sessions-unread"))) {
            finish(true);
            return;
          }
          next();
        })
        .catch(function () { next(); });
    };
    document.addEventListener("visibilitychange", function () {
      if (over) { return; }
      if (document.hidden && timer) {
        clearTimeout(timer);
        timer = 0;
        paused = true;
      } else if (!document.hidden && paused) {
        paused = false;
        next();
      }
    });
    next();
  }
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
