// Draws the dashboard's charts from the JSON the page embeds (#dashboard-data): bar charts of
// memories per layer, kind and state (a click on a bar opens the memory browser filtered to
// it; the links come from the JSON) and the activity line chart. The "log scale" checkbox
// (#log-scale, remembered in localStorage) switches the bar charts' y axis. Text and grid
// colours follow the page's (light or dark); the palette keeps at least 3:1 contrast on both.
(function () {
  "use strict";
  var LOG_KEY = "console.dashboard.logScale";
  var PALETTE = ["#2f7fc1", "#c2571a", "#1b8a5a", "#a855c7", "#d6336c", "#b7791f", "#0d8a8a",
                 "#7a7a7a"];
  var BARS = [["chart-layers", "layers"], ["chart-kinds", "kinds"], ["chart-states", "states"]];

  function remembered() {
    try { return window.localStorage.getItem(LOG_KEY) === "true"; } catch (e) { return false; }
  }
  function remember(on) {
    try { window.localStorage.setItem(LOG_KEY, on ? "true" : "false"); } catch (e) { /* private mode */ }
  }

  // Chart.js defaults from the page's own colours, so both colour schemes read well.
  function applyTheme() {
    var style = window.getComputedStyle(document.body);
    var fg = style.color || "#444";
    Chart.defaults.color = fg;
    Chart.defaults.borderColor = fg.replace(/^rgb\((.*)\)$/, "rgba($1, 0.15)");
  }

  // 1 to 10, then 20, 50, 100, 200, ... on a log axis; other ticks unlabelled (and unlined).
  function logTick(value) {
    if (value < 1 || !Number.isInteger(value)) { return null; }
    if (value <= 10) { return String(value); }
    var lead = value / Math.pow(10, Math.floor(Math.log10(value) + 1e-9));
    return [1, 2, 5].indexOf(Math.round(lead * 1e6) / 1e6) >= 0 ? value.toLocaleString() : null;
  }
  function yScale(log) {
    if (log) { return { type: "logarithmic", min: 0.5, ticks: { callback: logTick } }; }
    return { type: "linear", beginAtZero: true, ticks: { precision: 0 } };
  }
  // A log axis cannot show 0: zero bars are left out (the tooltip and table keep the counts).
  function values(counts, log) {
    return Object.keys(counts).map(function (name) {
      var n = counts[name];
      return log && n === 0 ? null : n;
    });
  }

  function barChart(canvas, counts, links, log) {
    return new Chart(canvas, {
      type: "bar",
      data: { labels: Object.keys(counts),
              datasets: [{ label: "memories", data: values(counts, log),
                           backgroundColor: PALETTE }] },
      options: {
        animation: false,
        scales: { y: yScale(log) },
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: {
            label: function (item) { return counts[item.label].toLocaleString() + " memories"; },
            footer: function () { return "Click to list them"; }
          } }
        },
        onHover: function (event, elements, chart) {
          chart.canvas.style.cursor = elements.length ? "pointer" : "default";
        },
        onClick: function (event, elements, chart) {
          var hit = chart.getElementsAtEventForMode(event, "nearest", { intersect: true }, true);
          if (!hit.length) { return; }
          var url = links[chart.data.labels[hit[0].index]];
          if (url) { window.location.assign(url); }
        }
      }
    });
  }

  function activityChart(canvas, data) {
    var many = data.labels.length > 48;
    function series(label, points, colour) {
      return { label: label, data: points, borderColor: colour, backgroundColor: colour,
               tension: 0.2, pointRadius: many ? 0 : 3, borderWidth: 2 };
    }
    return new Chart(canvas, {
      type: "line",
      data: { labels: data.labels, datasets: [
        series("writes", data.writes, PALETTE[0]),
        series("searches", data.searches, PALETTE[1]),
        series("recalls", data.recalls, PALETTE[2])
      ] },
      options: { animation: false, interaction: { mode: "index", intersect: false },
                 scales: { x: { ticks: { maxTicksLimit: 14 } },
                           y: { beginAtZero: true, ticks: { precision: 0 } } } }
    });
  }

  function draw() {
    var data = JSON.parse(document.getElementById("dashboard-data").textContent);
    var toggle = document.getElementById("log-scale");
    var charts = [];
    var bars = [];
    function build() {
      var log = toggle ? toggle.checked : false;
      applyTheme();
      BARS.forEach(function (pair) {
        var canvas = document.getElementById(pair[0]);
        if (!canvas) { return; }
        var chart = barChart(canvas, data[pair[1]], data.links[pair[1]], log);
        bars.push({ chart: chart, counts: data[pair[1]] });
        charts.push(chart);
      });
      var activity = document.getElementById("chart-activity");
      if (activity) { charts.push(activityChart(activity, data)); }
    }
    // Scales keep the colours they were built with: a change of scheme draws anew.
    function rebuild() {
      charts.forEach(function (chart) { chart.destroy(); });
      charts = [];
      bars = [];
      build();
    }
    if (toggle) {
      toggle.checked = remembered();
      toggle.addEventListener("change", function () {
        remember(toggle.checked);
        bars.forEach(function (bar) {
          bar.chart.options.scales.y = yScale(toggle.checked);
          bar.chart.data.datasets[0].data = values(bar.counts, toggle.checked);
          bar.chart.update();
        });
      });
    }
    build();
    if (window.matchMedia) {
      var scheme = window.matchMedia("(prefers-color-scheme: dark)");
      if (scheme.addEventListener) { scheme.addEventListener("change", rebuild); }
    }
    document.body.dataset.chartsReady = "true";
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); }
  else { draw(); }
})();
