// One EventSource per founder per browser, shared by every tab through this SharedWorker:
// browsers allow six HTTP/1.1 connections per host, so ten tabs must not open ten streams.
// Messages are whole states, so the worker keeps the newest per event name and hands them to
// tabs that join later.
"use strict";

const ports = new Set();
const latest = new Map(); // event name → {data, lastEventId}
const listening = new Set(); // event names tabs asked for
let source = null;
let url = null;

function broadcast(msg) {
  for (const p of ports) p.postMessage(msg);
}

function listen(name) {
  if (listening.has(name) || !source) return;
  listening.add(name);
  source.addEventListener(name, (ev) => {
    latest.set(name, { data: ev.data, lastEventId: ev.lastEventId });
    broadcast({ kind: "event", name, data: ev.data, lastEventId: ev.lastEventId });
  });
}

function open(u) {
  if (source) return;
  url = u;
  source = new EventSource(url);
  source.onopen = () => broadcast({ kind: "open" });
  source.onerror = () => {
    // EventSource reconnects by itself unless the server refused it (e.g. logged out).
    broadcast({ kind: "error", closed: source.readyState === EventSource.CLOSED });
    if (source.readyState === EventSource.CLOSED) {
      source = null;
      const names = [...listening];
      listening.clear();
      setTimeout(() => {
        if (ports.size === 0) return;
        open(url);
        names.forEach(listen);
      }, 2000);
    }
  };
}

self.onconnect = (e) => {
  const port = e.ports[0];
  ports.add(port);
  port.onmessage = (m) => {
    const msg = m.data;
    if (msg.kind === "connect") {
      open(msg.url);
      if (source && source.readyState === EventSource.OPEN) port.postMessage({ kind: "open" });
    } else if (msg.kind === "listen") {
      listen(msg.name);
      const last = latest.get(msg.name);
      if (last) port.postMessage({ kind: "event", name: msg.name, data: last.data, lastEventId: last.lastEventId });
    } else if (msg.kind === "bye") {
      ports.delete(port);
      if (ports.size === 0 && source) {
        source.close();
        source = null;
        listening.clear();
        latest.clear();
      }
    }
  };
  port.start();
};
