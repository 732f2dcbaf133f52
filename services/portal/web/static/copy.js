// Copy buttons: shown only when this script runs; without it the value
// stays selectable in its field. A button copies the field it names
// (data-copy-target) or its own data-copy-text (a shortened id's whole).
// "Copied" is also said in a live region, for screen readers, since the
// button's own text changing is not announced.
document.addEventListener("DOMContentLoaded", function () {
  var status = document.createElement("div");
  status.id = "copy-status";
  status.className = "visually-hidden";
  status.setAttribute("role", "status");
  status.setAttribute("aria-live", "polite");
  document.body.appendChild(status);

  // viaSelection copies text by selecting it in a field of its own, for
  // browsers (or pages) where the Clipboard API is refused.
  function viaSelection(text) {
    var field = document.createElement("textarea");
    field.value = text;
    field.setAttribute("readonly", "");
    field.className = "visually-hidden";
    document.body.appendChild(field);
    field.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(field);
    return ok;
  }

  document.querySelectorAll("button.copy").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = button.getAttribute("data-copy-text");
      if (text === null) {
        var target = document.getElementById(button.getAttribute("data-copy-target"));
        if (!target) { return; }
        text = "value" in target && target.tagName !== "PRE" ? target.value : target.textContent;
      }
      var label = button.textContent;
      var done = function () {
        button.textContent = "Copied";
        status.textContent = "";
        // A fresh text, so that a second copy is announced again.
        setTimeout(function () { status.textContent = "Copied"; }, 50);
        setTimeout(function () { button.textContent = label; }, 1500);
      };
      var fallback = function () { if (viaSelection(text)) { done(); } };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, fallback);
      } else {
        fallback();
      }
    });
  });
});
