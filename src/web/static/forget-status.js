// A forget's status page follows the purge by itself: it asks the same page again every two seconds and
// replaces the status region (announced politely to screen readers) until every copy is purged.
// Without JavaScript the page works the same way with its "Check again" link.
(function () {
  "use strict";
  var region = document.getElementById("forget-status");
  if (!region || !window.fetch || !window.DOMParser) { return; }
  var done = function (el) { return el.getAttribute("data-status") === "purge_complete"; };
  var tries = 0;
  function poll() {
    if (done(region) || tries++ > 300) { return; }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("forget-status");
          if (fresh) {
            region.innerHTML = fresh.innerHTML;
            region.setAttribute("data-status", fresh.getAttribute("data-status") || "");
          }
        }
        window.setTimeout(poll, 2000);
      })
      .catch(function () { window.setTimeout(poll, 4000); });
  }
  window.setTimeout(poll, 1000);
}());
