// "Select all" boxes: a checkbox with data-select-all="<CSS selector>" ticks or clears every
// checkbox that selector finds (the review queue's items, the memory browser's page).
document.addEventListener("change", function (e) {
  var selector = e.target && e.target.getAttribute && e.target.getAttribute("data-select-all");
  if (!selector) { return; }
  document.querySelectorAll(selector).forEach(function (box) { box.checked = e.target.checked; });
});
