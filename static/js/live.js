// Live updates for htmx-ext-sse through a shared connection (see live-worker.js), and the
// activity reports of the build page and of a share link's page. Loaded after htmx and its SSE
// extension.
"use strict";

// A message (or an action's answer) html of event id draws something el does not show yet: a
// newer state, or, for an element only a newer state replaces (data-redraw="newer": a share
// link's page), the same event drawing another state of the page (data-state): an app that is
// starting records no event of its own.
function sandmanNewer(id, html, el) {
  if (el?.dataset?.eventId === undefined) return true;
  const shown = Number(el.dataset.eventId);
  if (Number(id) !== shown) return Number(id) > shown;
  if (el.dataset.redraw !== "newer") return true; // the same state drawn again
  const m = /data-state="([^"]*)"/.exec(html || "");
  return m !== null && m[1] !== el.dataset.state;
}

(function () {
  // One stream per founder, or per share link for its visitors, in each browser.
  const key = document.querySelector('meta[name="sandman-user"]')?.content ||
    document.querySelector('meta[name="sandman-share"]')?.content;
  if (!key || typeof SharedWorker === "undefined") return; // htmx-ext-sse's own EventSource then

  // A fake EventSource that htmx-ext-sse drives like the real one.
  function SharedSource(url) {
    this.url = url;
    this.readyState = 0; // CONNECTING
    this.onopen = null;
    this.onerror = null;
    this.listeners = new Map();
    this.latest = new Map(); // event name → newest message, for elements swapped in after it
    this.pending = null;
    this.worker = new SharedWorker("/static/js/live-worker.js", { name: "sandman-live-" + key });
    this.port = this.worker.port;
    this.port.onmessage = (m) => this.receive(m.data);
    this.port.start();
    this.port.postMessage({ kind: "connect", url });
    window.addEventListener("pagehide", () => this.close());
  }
  SharedSource.prototype.receive = function (msg) {
    if (msg.kind === "open") {
      this.readyState = 1;
      if (this.onopen) this.onopen(new Event("open"));
    } else if (msg.kind === "error") {
      this.readyState = msg.closed ? 2 : 0;
      if (this.onerror) this.onerror(new Event("error"));
    } else if (msg.kind === "event") {
      this.latest.set(msg.name, msg);
      this.dispatch(msg);
      // A state that arrives while htmx is still swapping in the previous one reaches only the
      // old element's listener, which drops it: look again once the swap has settled.
      clearTimeout(this.pending);
      this.pending = setTimeout(() => this.catchUp(), 100);
    }
  };
  SharedSource.prototype.dispatch = function (msg) {
    const ev = new MessageEvent(msg.name, { data: msg.data, lastEventId: msg.lastEventId });
    for (const fn of [...(this.listeners.get(msg.name) || [])]) fn(ev);
  };
  // catchUp hands the newest state to every element that shows an older one (data-event-id),
  // or another visitor's state of the same event (sandmanNewer).
  SharedSource.prototype.catchUp = function () {
    for (const el of document.querySelectorAll("[sse-swap][data-event-id]")) {
      const msg = this.latest.get(el.getAttribute("sse-swap"));
      if (!msg) continue;
      // An equal state is not handed again (each swap settles into another catch-up), unless it
      // draws another visitor's state.
      const newer = el.dataset.redraw === "newer" ? sandmanNewer(msg.lastEventId, msg.data, el)
        : Number(msg.lastEventId) > Number(el.dataset.eventId);
      if (newer) this.dispatch(msg);
    }
  };
  SharedSource.prototype.addEventListener = function (name, fn) {
    if (!this.listeners.has(name)) {
      this.listeners.set(name, new Set());
      this.port.postMessage({ kind: "listen", name });
    }
    this.listeners.get(name).add(fn);
  };
  SharedSource.prototype.removeEventListener = function (name, fn) {
    this.listeners.get(name)?.delete(fn);
  };
  SharedSource.prototype.close = function () {
    if (this.readyState === 2) return;
    this.readyState = 2;
    this.port.postMessage({ kind: "bye" });
  };

  // The page's stream is opened as soon as this script runs, while htmx sets the page up, not
  // when htmx reaches its sse-connect: the worker's start and the connection overlap htmx's own.
  // The events the page's elements follow are asked for at once, so none that arrives before
  // htmx listens is lost (the worker keeps the newest of each for it).
  const page = document.querySelector("[sse-connect]");
  let early = null;
  if (page) {
    early = new SharedSource(page.getAttribute("sse-connect"));
    for (const el of document.querySelectorAll("[sse-swap], [sse-close]")) {
      const names = (el.getAttribute("sse-swap") || "").split(",").concat(el.getAttribute("sse-close") || "");
      for (const name of names.map((n) => n.trim()).filter(Boolean)) early.port.postMessage({ kind: "listen", name });
    }
  }
  let current = null;
  htmx.createEventSource = (url) => {
    if (early && url === early.url) {
      current = early;
      early = null;
      return current;
    }
    return (current = new SharedSource(url));
  };
  document.addEventListener("htmx:afterSettle", () => current && current.catchUp());
})();

// A fragment never goes back to an older state than the one it shows (data-event-id): an
// action's answer read just before a change the stream has already brought, or a stream
// message older than the page, is dropped (its out-of-band parts with it). Equal is the same
// state drawn again (a moved deadline, a build stage) and is swapped in, except where the
// element says only a newer state replaces it (data-redraw="newer": a share link's page, which
// shows nothing that changes within a state), unless it draws another visitor's state
// (sandmanNewer).
(function () {
  document.addEventListener("htmx:beforeSwap", (ev) => {
    const target = ev.detail.target;
    const html = ev.detail.serverResponse || "";
    const m = /data-event-id="(\d+)"/.exec(html);
    if (m && target?.matches?.("[sse-swap][data-event-id]") && !sandmanNewer(m[1], html, target)) ev.detail.shouldSwap = false;
  });
  document.addEventListener("htmx:sseBeforeMessage", (ev) => {
    if (!sandmanNewer(ev.detail.lastEventId, ev.detail.data, ev.target)) ev.preventDefault();
  });
  // An action's answer whose target the stream replaced meanwhile is dropped too. Its events no
  // longer reach the document (the target is out of it), so the check listens on the target
  // itself. Swapped into the detached element, the answer would take a preview frame of the same
  // id out of the page: htmx moves hx-preserve elements by id, wherever the swap goes.
  document.addEventListener("htmx:beforeRequest", (ev) => {
    const target = ev.detail.target;
    if (!target) return;
    target.addEventListener("htmx:beforeSwap", (e) => {
      if (!e.detail.target.isConnected) e.detail.shouldSwap = false;
    }, { once: true });
  });
})();

// The build page (its pane) and a share link's page tell Sandman someone is looking, while the
// tab is visible, at most once a minute (a share link's page more often when the idle timeout
// is under three minutes: its data-activity-every); that moves the sandbox's idle deadline. The
// element with data-activity-url says where.
(function () {
  const MINUTE = 60 * 1000;
  let last = 0;
  function csrf() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"] || "";
    } catch (e) {
      return ""; // a share link's page has no session
    }
  }
  function report() {
    const el = document.querySelector("[data-activity-url]");
    if (!el || document.visibilityState !== "visible") return;
    const every = Math.min(MINUTE, Number(el.dataset.activityEvery) || MINUTE);
    if (Date.now() - last < every) return;
    last = Date.now();
    const token = csrf();
    fetch(el.dataset.activityUrl, {
      method: "POST",
      headers: token ? { "X-CSRF-Token": token } : {},
      credentials: "same-origin",
      keepalive: true,
    }).catch(() => {});
  }
  document.addEventListener("visibilitychange", report);
  document.addEventListener("DOMContentLoaded", report);
  setInterval(report, 1000);
})();
