// Copy buttons: shown only when this script runs; without it the value
// stays selectable in its field.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.copy[data-copy-target]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var target = document.getElementById(button.getAttribute("data-copy-target"));
      if (!target) { return; }
      var text = "value" in target && target.tagName !== "PRE" ? target.value : target.textContent;
      var done = function () {
        var label = button.textContent;
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = label; }, 1500);
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done);
      } else if (target.select) {
        target.select();
        document.execCommand("copy");
        done();
      }
    });
  });
});
