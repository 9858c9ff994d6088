// The review queue's "select all" box.
document.addEventListener("DOMContentLoaded", function () {
  var all = document.getElementById("select-all");
  if (!all) { return; }
  all.addEventListener("change", function (e) {
    document.querySelectorAll('#review-list input[name="items"]').forEach(function (box) {
      box.checked = e.target.checked;
    });
  });
});
