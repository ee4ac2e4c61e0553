// Sandman's own script: small progressive enhancements that htmx does not cover. Every page
// works without it; with it, Copy URL copies, the rebuild question opens as a dialog, and times
// count by themselves.
"use strict";

document.documentElement.classList.replace("no-js", "js");

// "Copy URL" buttons copy their data-copy value and say so briefly; "Copy for the AI" copies
// the text of the element its data-copy-from names (the readonly text area shown without it).
document.addEventListener("click", (ev) => {
  const btn = ev.target.closest("[data-copy], [data-copy-from]");
  if (!btn || !navigator.clipboard) return;
  const from = btn.dataset.copyFrom ? document.getElementById(btn.dataset.copyFrom) : null;
  const text = from ? from.value : btn.dataset.copy;
  if (text == null) return;
  navigator.clipboard.writeText(text).then(() => {
    const label = btn.textContent;
    btn.textContent = "Copied";
    setTimeout(() => { btn.textContent = label; }, 1500);
  });
});

// A form that the live feed drew has no session token of its own (htmx sends it as a header).
// Submitted before htmx took it over (in the moment after a swap), it carries the page's token.
document.addEventListener("submit", (ev) => {
  const form = ev.target;
  if (!(form instanceof HTMLFormElement) || form.method !== "post" || form.elements.namedItem("_csrf")) return;
  let token = "";
  try {
    token = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"] || "";
  } catch (e) {
    return;
  }
  const field = document.createElement("input");
  field.type = "hidden";
  field.name = "_csrf";
  field.value = token;
  form.append(field);
}, true);

// The folder input is hidden behind "choose a folder": say what was chosen.
document.addEventListener("change", (ev) => {
  const input = ev.target;
  const out = input.id === "folder" && document.querySelector("[data-folder-chosen]");
  if (!out) return;
  const n = input.files.length;
  const folder = n ? (input.files[0].webkitRelativePath || "").split("/")[0] : "";
  const files = n + (n === 1 ? " file" : " files") + " chosen";
  out.textContent = !n ? "" : folder ? files + " from the folder " + folder + "." : files + ".";
});

// A link with data-dialog asks its question in the page's dialog of that id instead of on a
// page of its own (the operator's Kill); without JavaScript the link opens that page.
document.addEventListener("click", (ev) => {
  const link = ev.target.closest("a[data-dialog]");
  const d = link && document.getElementById(link.dataset.dialog);
  if (!d || typeof d.showModal !== "function") return;
  ev.preventDefault();
  d.showModal();
});

// The rebuild question. A Rebuild button fills the page's dialog (hx-get into #rebuild-dialog)
// and it opens as a modal, which moves the focus into it; Escape and Cancel close it and send
// nothing. Its answer closes it too, and the focus goes to the fragment the answer replaced.
(function () {
  // It opens once htmx has taken over its form (after the swap settles), so an answer at once
  // still goes through htmx.
  let filled = false;
  document.addEventListener("htmx:afterSwap", (ev) => {
    if (ev.detail.target?.id === "rebuild-dialog") filled = true;
  });
  document.addEventListener("htmx:afterSettle", () => {
    const d = document.getElementById("rebuild-dialog");
    if (!filled || !d) return;
    filled = false;
    if (!d.open) d.showModal();
  });
  document.addEventListener("htmx:afterRequest", (ev) => {
    const form = ev.detail.elt;
    const d = form instanceof Element ? form.closest("dialog") : null;
    if (!d || !d.open) return;
    const target = document.querySelector(form.getAttribute("hx-target") || "none");
    d.close();
    if (ev.detail.successful && target) {
      const first = target.querySelector("button:not([disabled]), a[href]");
      if (!first) target.tabIndex = -1;
      (first || target).focus();
    }
  });
})();

// Live updates replace a whole card or pane, and the element that had the keyboard's focus with
// it. The focus then goes to the same control in the new fragment, or to its first control when
// the new state has no such control, so a keyboard user keeps their place.
(function () {
  let last = null; // the element that had the focus last
  document.addEventListener("focusin", (ev) => { last = ev.target; });
  document.addEventListener("htmx:afterSettle", () => {
    const active = document.activeElement;
    if (!last || last.isConnected || (active && active !== document.body)) return;
    const old = last.closest("[sse-swap][id]");
    const now = old && document.getElementById(old.id);
    if (!now) return;
    const id = last.dataset.testid;
    const el = (id && now.querySelector('[data-testid="' + id + '"]:not([disabled])')) ||
      now.querySelector("button:not([disabled]), a[href]") || now;
    if (el === now) now.tabIndex = -1;
    el.focus({ preventScroll: true });
  });
})();

// Relative times ("2 min ago") and the countdown to a preview's idle pause ("Sleeping in 3
// min") count by themselves, from the instants in the markup and the server's clock (the
// page's sandman-now), so a browser with a wrong clock still shows them right. No request:
// every push of a card or pane brings fresh instants. The wording follows views/states.go
// (agoText, sleepsInText).
(function () {
  const MINUTE = 60 * 1000, HOUR = 60 * MINUTE, DAY = 24 * HOUR;
  const served = Date.parse(document.querySelector('meta[name="sandman-now"]')?.content || "");
  const skew = Number.isNaN(served) ? 0 : served - Date.now();
  const now = () => Date.now() + skew;

  function ago(ms) {
    if (ms < MINUTE) return "just now";
    if (ms < HOUR) return Math.floor(ms / MINUTE) + " min ago";
    if (ms < DAY) return Math.floor(ms / HOUR) + " h ago";
    return Math.floor(ms / DAY) + " d ago";
  }
  function sleepsIn(ms) {
    if (ms < MINUTE) return "Sleeping in less than a minute";
    return "Sleeping in " + Math.floor(ms / MINUTE) + " min";
  }
  function set(el, text) {
    if (el.textContent !== text) el.textContent = text;
  }
  function tick() {
    const t = now();
    for (const el of document.querySelectorAll("time[data-ago]")) {
      const at = Date.parse(el.getAttribute("datetime"));
      if (Number.isNaN(at)) continue;
      set(el, ago(t - at));
      if (!el.dataset.local) {
        el.title = new Date(at).toLocaleString();
        el.dataset.local = "1";
      }
    }
    for (const el of document.querySelectorAll("[data-sleeps-at]")) {
      const at = Date.parse(el.dataset.sleepsAt);
      if (!Number.isNaN(at)) set(el, sleepsIn(at - t));
    }
  }
  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  setInterval(tick, 1000);
})();
