// Errors in the preview's page reach Sandman through the page that shows it (docs/architecture.md,
// "The browser's reports"): the script the preview's proxy adds posts each to its parent window,
// and this page relays it, same-origin, with its own authority (the founder's session and CSRF
// token, or the share link). Only its own preview frame is heard, from that frame's origin.
"use strict";

(() => {
  const share = document.querySelector('meta[name="sandman-share"]');
  const max = 16000; // bytes as sent; the server takes 16 KiB (16,384)
  let sent = 0;
  let since = Date.now();

  const text = (v, n) => String(v == null ? "" : v).slice(0, n);

  window.addEventListener("message", (ev) => {
    const d = ev.data;
    if (!d || typeof d !== "object" || d.sandman !== "report") return;
    const frame = Array.from(document.querySelectorAll("iframe")).find((f) => f.contentWindow === ev.source);
    if (!frame) return;
    let origin;
    try {
      origin = new URL(frame.src, location.href).origin;
    } catch (e) {
      return;
    }
    if (ev.origin !== origin) return;
    const url = share ? share.content + "/reports" : frame.dataset.reportUrl;
    if (!url) return;
    // The server's limits are the rule; this only spares it refusals from a page that throws in
    // a loop.
    const now = Date.now();
    if (now - since > 60000) {
      since = now;
      sent = 0;
    }
    if (++sent > 20) return;
    const report = { kind: text(d.kind, 40), message: text(d.message, 4000) || "(no message)", stack: text(d.stack, 8000), url: text(d.url, 2000) };
    let body = JSON.stringify(report);
    const enc = new TextEncoder();
    while (enc.encode(body).length > max && (report.stack || report.message.length > 100)) {
      if (report.stack) report.stack = report.stack.slice(0, report.stack.length >> 1);
      else report.message = report.message.slice(0, report.message.length >> 1);
      body = JSON.stringify(report);
    }
    const headers = { "Content-Type": "application/json" };
    if (!share) {
      try {
        headers["X-CSRF-Token"] = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"];
      } catch (e) {
        return;
      }
    }
    fetch(url, { method: "POST", headers, body, credentials: "same-origin", keepalive: true }).catch(() => {});
  });
})();
