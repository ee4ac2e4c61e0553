// Sandman's reporter: the preview proxy adds it to every page of the app. It tells the page's
// uncaught errors, unhandled promise rejections, console.error calls and Vite's error overlay to
// the window that frames the page, Sandman's, which relays them (docs/architecture.md, "The
// preview proxy" and "The browser's reports"). It calls nothing itself: the page alone in a tab
// has no one to tell, and reports nothing.
(function () {
  "use strict";
  if (window.parent === window || window.__sandmanReporter) return;
  window.__sandmanReporter = true;

  var MAX_BYTES = 16384; // a report, as JSON
  var PER_MINUTE = 10;
  var SEEN_MAX = 200; // reports remembered to skip their repeats

  var sentAt = [];
  var seen = Object.create(null);
  var seenCount = 0;
  var busy = false; // a report under way: a console.error it causes is not reported again

  function text(v) {
    if (v == null) return "";
    if (typeof v === "string") return v;
    if (v instanceof Error) return v.name + ": " + v.message;
    try {
      var s = JSON.stringify(v);
      if (s !== undefined) return s;
    } catch (e) { /* cyclic, or a getter that throws */ }
    try { return String(v); } catch (e) { return "[unprintable]"; }
  }

  function bytes(s) {
    return typeof TextEncoder === "function" ? new TextEncoder().encode(s).length : s.length * 3;
  }

  function cut(s, n) {
    return s.length > n ? s.slice(0, n) + "\u2026 (cut)" : s;
  }

  function report(kind, message, stack) {
    if (busy) return;
    busy = true;
    try {
      message = text(message);
      stack = stack ? String(stack) : "";
      var key = kind + "\n" + message + "\n" + stack;
      if (seen[key]) return;
      var now = Date.now();
      while (sentAt.length && now - sentAt[0] >= 60000) sentAt.shift();
      if (sentAt.length >= PER_MINUTE) return;
      if (seenCount >= SEEN_MAX) { seen = Object.create(null); seenCount = 0; }
      seen[key] = true;
      seenCount++;
      sentAt.push(now);
      var r = {
        kind: kind,
        message: cut(message, 4096),
        stack: cut(stack, 8192),
        url: cut(String(location.href), 2048)
      };
      var body = JSON.stringify(r);
      while (bytes(body) > MAX_BYTES && (r.stack.length > 64 || r.message.length > 64)) {
        if (r.stack.length > 64) r.stack = cut(r.stack, r.stack.length >> 1);
        else r.message = cut(r.message, r.message.length >> 1);
        body = JSON.stringify(r);
      }
      // Only the four fields Sandman takes: it refuses a report with any other. "*": the page
      // does not know Sandman's origin; the report is the page's own, for whoever frames it.
      window.parent.postMessage({ sandman: "report", kind: r.kind, message: r.message, stack: r.stack, url: r.url }, "*");
    } catch (e) {
      /* the reporter never breaks the page */
    } finally {
      busy = false;
    }
  }

  window.addEventListener("error", function (e) {
    // A resource that failed to load (an image, a script file) also fires "error", on its
    // element: only errors of scripts are reports.
    if (!(e instanceof ErrorEvent)) return;
    var err = e.error;
    var where = e.filename ? "\n    at " + e.filename + ":" + e.lineno + ":" + e.colno : "";
    report("error", e.message || text(err), (err && err.stack) || where.trim());
  }, true);

  window.addEventListener("unhandledrejection", function (e) {
    var reason = e.reason;
    report("unhandledrejection", reason instanceof Error ? text(reason) : "Unhandled rejection: " + text(reason),
      reason && reason.stack);
  });

  var original = console.error;
  console.error = function () {
    var result = original.apply(this, arguments);
    var parts = [], stack = "";
    for (var i = 0; i < arguments.length; i++) {
      var a = arguments[i];
      parts.push(text(a));
      if (!stack && a instanceof Error && a.stack) stack = a.stack;
    }
    if (!stack) {
      // Where it was called from: the caller's frames, without this wrapper's.
      stack = String(new Error().stack || "").split("\n").slice(2).join("\n");
    }
    report("console.error", parts.join(" "), stack);
    return result;
  };

  // Vite shows a build error (a syntax error in a module…) in its overlay, a custom element in
  // the page: its message and stack are in its open shadow root.
  function overlay(el) {
    var root = el.shadowRoot;
    if (!root) return;
    var msg = root.querySelector(".message-body");
    var file = root.querySelector(".file");
    var frame = root.querySelector(".frame");
    var stack = root.querySelector(".stack");
    report("error", "Vite: " + (msg ? msg.textContent.trim() : "build error"),
      [file && file.textContent.trim(), frame && frame.textContent, stack && stack.textContent]
        .filter(Boolean).join("\n"));
  }
  function watchOverlay() {
    if (typeof MutationObserver !== "function" || !document.body) return;
    // An overlay already there came before the observer (added while the page still loaded).
    var present = document.body.children;
    for (var i = 0; i < present.length; i++) {
      if (present[i].nodeName === "VITE-ERROR-OVERLAY") overlay(present[i]);
    }
    // Vite appends the overlay to the body: its direct children are all there is to watch.
    new MutationObserver(function (changes) {
      for (var i = 0; i < changes.length; i++) {
        var added = changes[i].addedNodes;
        for (var j = 0; j < added.length; j++) {
          if (added[j].nodeName === "VITE-ERROR-OVERLAY") overlay(added[j]);
        }
      }
    }).observe(document.body, { childList: true });
  }
  if (document.body) watchOverlay();
  else document.addEventListener("DOMContentLoaded", watchOverlay);
})();
