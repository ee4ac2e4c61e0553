// A share link's page wakes its sleeping preview by itself while someone looks at it: the Wake
// preview form (data-autowake) of each sleeping state drawn is sent once, as soon as the page is
// visible. A page in a background tab wakes nothing until it is looked at.
//
// This script is not deferred and comes last in the page, so the page's first wake goes out as
// soon as the page is parsed, before htmx (deferred) has even started: the visitor waits for the
// resume, not for the scripts. Its answer is not swapped in: the link's stream, which starts with
// the current state, brings the waking state and every one after it. Should that first wake
// fail, the form is sent again through htmx, which shows why (the page's flash), and the Wake
// preview button stays to try again by hand. Sleeping states drawn later (by the stream) are
// sent through htmx.
"use strict";

(function () {
  function wake() {
    if (document.visibilityState !== "visible") return;
    const form = document.querySelector("form[data-autowake]:not([data-sent])");
    if (!form) return;
    if (!window.htmx) {
      if (!form.dataset.early) wakeEarly(form);
      return;
    }
    if (!form["htmx-internal-data"]) return; // not yet taken over by htmx: its htmx:load follows
    form.dataset.sent = "1";
    form.requestSubmit();
  }

  // wakeEarly posts the form before htmx runs, as htmx would (the same request, its answer
  // unused); a failure hands the form back to htmx.
  function wakeEarly(form) {
    form.dataset.sent = form.dataset.early = "1";
    const button = form.querySelector("button");
    if (button) button.disabled = true;
    fetch(location.pathname, { method: "POST", headers: { "HX-Request": "true" }, credentials: "same-origin" })
      .then((res) => {
        if (!res.ok) throw new Error(res.status);
      })
      .catch(() => {
        if (button) button.disabled = false;
        delete form.dataset.sent;
        wake();
      });
  }

  document.addEventListener("htmx:load", wake);
  document.addEventListener("visibilitychange", wake);
  // An answer that failed (over the visitors' limit, a server error: its reason is in the page's
  // flash) shows the Wake preview button, to try again by hand.
  function failed(ev) {
    const form = ev.detail?.elt?.closest?.("form[data-autowake]");
    if (form) form.classList.add("wake-failed");
  }
  document.addEventListener("htmx:responseError", failed);
  document.addEventListener("htmx:sendError", failed);
  wake();
})();
