// Draws an entity's neighbourhood from the JSON the page embeds (#graph-data) with
// vis-network: entities as dots coloured by type, memories as grey boxes, the entity in the
// centre larger. A click on a node opens its page (an entity's neighbourhood, a memory).
// The table under the drawing lists the same nodes for readers without a canvas.
(function () {
  "use strict";
  function draw() {
    var holder = document.getElementById("graph-drawing");
    var source = document.getElementById("graph-data");
    if (!holder || !source || typeof vis === "undefined") { return; }
    var data = JSON.parse(source.textContent);
    var byId = {};
    var nodes = data.nodes.map(function (n) {
      byId[n.id] = n;
      var centre = n.id === data.centre;
      return {
        id: n.id, label: n.short, title: n.label + " (" + n.kind + ", " + n.type + ")",
        shape: n.kind === "memory" ? "box" : "dot", size: centre ? 22 : 14,
        color: { background: n.colour, border: centre ? "#222" : n.colour,
                 highlight: { background: n.colour, border: "#222" } },
        borderWidth: centre ? 3 : 1,
        font: n.kind === "memory" ? { color: "#fff", size: 12 } : { size: centre ? 16 : 13 }
      };
    });
    var edges = data.edges.map(function (e) {
      return { from: e.source, to: e.target,
               label: e.relation === "MENTIONS" ? "" : e.relation.toLowerCase().replace(/_/g, " "),
               title: e.relation, color: { color: "#9aa0a6" }, font: { size: 11, align: "middle" } };
    });
    var network = new vis.Network(holder, {
      nodes: new vis.DataSet(nodes), edges: new vis.DataSet(edges)
    }, {
      physics: { solver: "forceAtlas2Based", stabilization: { iterations: 250 } },
      interaction: { hover: true, tooltipDelay: 150 },
      layout: { randomSeed: 7 }
    });
    network.once("stabilizationIterationsDone", function () {
      network.setOptions({ physics: false });
      network.once("afterDrawing", function () {
        holder.dataset.nodes = String(nodes.length);
        holder.dataset.drawn = "true";
      });
      network.fit();
      network.redraw();
    });
    network.on("click", function (params) {
      var node = params.nodes.length ? byId[params.nodes[0]] : null;
      if (node && node.href && node.id !== data.centre) { window.location.assign(node.href); }
    });
    network.on("hoverNode", function () { holder.style.cursor = "pointer"; });
    network.on("blurNode", function () { holder.style.cursor = ""; });
    holder.network = network;
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); }
  else { draw(); }
})();
