// skiplock dashboard: live refresh and confirmations, as a file (the CSP forbids inline script).
"use strict";

// Forms with data-confirm ask first (single-job actions; bulk ones have a preview page).
document.addEventListener("submit", (event) => {
  const message = event.target.dataset && event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// A live page (<main data-refresh="N">) re-reads itself every N seconds and swaps its
// content, unless the person is typing in it or has something unfolded.
function busy(main) {
  const active = document.activeElement;
  return (active && main.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName))
    || main.querySelector("details[open]") !== null;
}

async function refresh(main) {
  if (document.hidden || busy(main)) return;
  try {
    const response = await fetch(window.location.href, { headers: { "X-Refresh": "1" } });
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("live");
    if (fresh && !busy(main)) {
      main.innerHTML = fresh.innerHTML;
      main.dataset.refreshedAt = String(Date.now());
    }
  } catch (error) {
    // the server is restarting or unreachable: try again next time
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const main = document.getElementById("live");
  const seconds = main && Number(main.dataset.refresh);
  if (seconds > 0) window.setInterval(() => refresh(main), seconds * 1000);
});
