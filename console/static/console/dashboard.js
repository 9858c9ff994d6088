// Draws the dashboard's charts from the JSON the page embeds (#dashboard-data).
(function () {
  "use strict";
  function draw() {
    var data = JSON.parse(document.getElementById("dashboard-data").textContent);
    var palette = ["#417690", "#79aec8", "#e0a800", "#ba2121", "#2e7d32", "#6f42c1", "#999"];
    function bars(id, counts, label) {
      new Chart(document.getElementById(id), {
        type: "bar",
        data: { labels: Object.keys(counts),
                datasets: [{ label: label, data: Object.values(counts), backgroundColor: palette }] },
        options: { plugins: { legend: { display: false } }, animation: false,
                   scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } }
      });
    }
    bars("chart-layers", data.layers, "memories");
    bars("chart-kinds", data.kinds, "memories");
    bars("chart-states", data.states, "memories");
    new Chart(document.getElementById("chart-activity"), {
      type: "line",
      data: { labels: data.hours, datasets: [
        { label: "writes", data: data.writes, borderColor: palette[0], tension: 0.2 },
        { label: "searches", data: data.searches, borderColor: palette[2], tension: 0.2 },
        { label: "recalls", data: data.recalls, borderColor: palette[4], tension: 0.2 }
      ] },
      options: { animation: false, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } }
    });
    document.body.dataset.chartsReady = "true";
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); }
  else { draw(); }
})();
