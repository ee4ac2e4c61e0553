// The build page's Logs panel follows the project's log stream (one "log" event per line, its
// id the line's seq) after the newest line the page was drawn with. Lines are data: drawn with
// textContent, never as markup. Without JavaScript the panel shows the lines drawn on the server.
"use strict";

(() => {
  const panel = document.getElementById("logs");
  if (!panel || !window.EventSource) return;
  const list = panel.querySelector(".log-lines");
  const empty = panel.querySelector("[data-testid=logs-empty]");
  const keep = 1000; // lines kept in the page; older ones leave it
  let after = panel.dataset.after || "0";
  const span = (cls, testid, text) => {
    const el = document.createElement(cls === "log-text" ? "code" : "span");
    el.className = cls;
    el.dataset.testid = testid;
    el.textContent = text;
    return el;
  };
  const add = (l) => {
    const atEnd = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    const li = document.createElement("li");
    li.className = "log-line " + (l.stream === "stderr" ? "stderr" : "stdout");
    li.dataset.testid = "log-line";
    li.dataset.seq = String(l.seq);
    const ver = span("log-ver", "", "v" + l.version);
    delete ver.dataset.testid;
    li.append(span("log-src", "log-source", l.source), " ", span("log-stream", "log-stream", l.stream), " ", ver, " ",
      span("log-text", "log-text", l.text));
    list.append(li);
    while (list.children.length > keep) list.firstElementChild.remove();
    if (empty) empty.hidden = true;
    if (atEnd) list.scrollTop = list.scrollHeight;
  };
  const es = new EventSource(panel.dataset.streamUrl + "?after=" + encodeURIComponent(after));
  es.addEventListener("log", (ev) => {
    let l;
    try {
      l = JSON.parse(ev.data);
    } catch (e) {
      return;
    }
    if (Number(l.seq) <= Number(after)) return;
    after = String(l.seq);
    add(l);
  });
  window.addEventListener("pagehide", () => es.close());
})();
