// The admin page's self-refresh. Every few seconds (the body's
// data-refresh, in milliseconds) it fetches the page it is on and swaps in
// the parts marked data-live, so times, outcomes and statuses stay current
// without a reload. Without JavaScript the page is complete as served; this
// only saves the reload. It runs under the page's Content-Security-Policy
// (script-src 'self'), so it is served from the admin itself.
"use strict";
(() => {
  const every = Number(document.body.dataset.refresh);
  if (!(every > 0) || !document.querySelector("[data-live]")) {
    return;
  }
  let busy = false;
  async function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    const updated = document.getElementById("updated");
    try {
      const resp = await fetch(location.href, { cache: "no-store", credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!resp.ok) {
        throw new Error("HTTP " + resp.status);
      }
      const fresh = new DOMParser().parseFromString(await resp.text(), "text/html");
      // DOMParser parses as if scripting were off, so what <noscript>
      // holds would show; it is not for a page that runs this.
      for (const n of fresh.querySelectorAll("noscript")) {
        n.remove();
      }
      for (const el of document.querySelectorAll("[data-live][id]")) {
        const next = fresh.getElementById(el.id);
        if (!next) {
          continue;
        }
        // An error an operator opened stays open across the swap.
        const open = new Set([...el.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));
        for (const d of next.querySelectorAll("details[data-key]")) {
          d.open = open.has(d.dataset.key);
        }
        el.replaceWith(document.adoptNode(next));
      }
    } catch (err) {
      if (updated) {
        updated.classList.add("stale");
        updated.textContent = "not refreshed: " + err.message;
      }
    } finally {
      busy = false;
    }
  }
  setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();
