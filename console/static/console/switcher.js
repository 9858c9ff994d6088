// The platform admins' tenant switcher opens the chosen tenant as soon as it is picked (the
// form's Switch button does the same without JavaScript).
document.addEventListener("change", function (e) {
  if (e.target && e.target.id === "switch-tenant") { e.target.form.submit(); }
});
