// kubeskills console: follow the cluster. The server tells this page, as
// server-sent events, when the runs it shows change; the page then reads
// itself again and swaps in its live parts (the elements with data-live),
// keeping what the person is typing and where the focus is. Everything
// works without this script, by reloading.
"use strict";
(function () {
  if (!window.EventSource || !document.querySelector("[data-live]")) {
    return;
  }
  let busy = false;
  let again = false;
  async function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      const res = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
      if (!res.ok) {
        return;
      }
      const next = new DOMParser().parseFromString(await res.text(), "text/html");
      const focused = document.activeElement && document.activeElement.id;
      const typed = {};
      document.querySelectorAll("[data-live] textarea, [data-live] input").forEach(function (el) {
        if (el.id) {
          typed[el.id] = el.value;
        }
      });
      document.querySelectorAll("[data-live][id]").forEach(function (el) {
        const fresh = next.getElementById(el.id);
        if (fresh) {
          el.replaceWith(document.importNode(fresh, true));
        }
      });
      Object.keys(typed).forEach(function (id) {
        const el = document.getElementById(id);
        if (el) {
          el.value = typed[id];
        }
      });
      if (focused && document.getElementById(focused)) {
        document.getElementById(focused).focus();
      }
    } finally {
      busy = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }
  const events = new EventSource("/events");
  events.addEventListener("change", refresh);
})();
