// Sandman's own script: small progressive enhancements that htmx does not cover.
"use strict";

// "Copy URL" buttons copy their data-copy value and say so briefly.
document.addEventListener("click", (ev) => {
  const btn = ev.target.closest("[data-copy]");
  if (!btn || !navigator.clipboard) return;
  navigator.clipboard.writeText(btn.dataset.copy).then(() => {
    const label = btn.textContent;
    btn.textContent = "Copied";
    setTimeout(() => { btn.textContent = label; }, 1500);
  });
});

// "Cancel" in a confirmation removes the confirmation.
document.addEventListener("click", (ev) => {
  const btn = ev.target.closest("[data-dismiss]");
  if (btn) btn.closest(btn.dataset.dismiss)?.remove();
});
