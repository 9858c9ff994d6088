// Forms that destroy something ask first: a form with data-confirm="question" is sent only
// when the user confirms (one click on Revoke, Delete or Soft delete is not enough).
document.addEventListener("submit", function (e) {
  var form = e.target;
  var question = form && form.getAttribute && form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    e.preventDefault();
  }
}, true);
