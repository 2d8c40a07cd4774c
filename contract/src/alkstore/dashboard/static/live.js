// Live refresh without a build step: the server's event stream says "change", and
// the page fetches its own URL's live part (the #live element) and swaps it in.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var status = document.getElementById("live-status");
  if (!live || !window.EventSource || !window.fetch) return;
  var busy = false, again = false, refreshes = 0;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { headers: { "X-Alkstore-Partial": "1" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        refreshes += 1;
        live.setAttribute("data-refreshes", String(refreshes));
      })
      .catch(function () { if (status) status.textContent = "live update failed; reload the page"; })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  var source = new EventSource(document.body.getAttribute("data-events"), { withCredentials: true });
  source.addEventListener("open", function () { if (status) status.textContent = "live"; });
  source.addEventListener("error", function () { if (status) status.textContent = "reconnecting…"; });
  source.addEventListener("change", refresh);
})();
