// A share link's page wakes its sleeping preview by itself while someone looks at it: the Wake
// preview form (data-autowake) of each sleeping state drawn is sent once, through htmx, as soon
// as the page is visible. A page in a background tab wakes nothing until it is looked at.
"use strict";

(function () {
  function wake() {
    if (document.visibilityState !== "visible") return;
    const form = document.querySelector("form[data-autowake]:not([data-sent])");
    if (!form || !form["htmx-internal-data"]) return; // not yet taken over by htmx: its htmx:load follows
    form.dataset.sent = "1";
    form.requestSubmit();
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
})();
