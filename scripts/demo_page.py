"""The demo's HTML page (scripts/demo, `make demo`): one self-contained
file, inline CSS, SVG and JavaScript, nothing fetched from the network.

render(timeline) takes a plain JSON-able dict and returns the page's text;
write(timeline, path) writes it. The dict (times in seconds from the start
of the client load):

    {
      "title": "baton rolling upgrade 1.0.0 -> 1.3.0",
      "t_end": 42.0,                       # length of the picture
      "bucket_ms": 100,                    # throughput resolution
      "throughput": [31, 40, ...],         # acknowledged ops per bucket
      "failed": [0, 2, ...],               # failed + indeterminate per bucket
      "nodes": [1, 2, 3],
      "releases": {"1": [[0.0, "1.0.0"], [5.1, null], [5.4, "1.1.0"]]},
                                           # per node; null: not running
      "restarts": [{"t": 5.1, "node": 1, "release": "1.1.0",
                    "gap_ms": 48.0}],      # gap_ms may be null
      "leaders": [{"t": 0.0, "node": 1, "term": 2, "release": "1.0.0"}],
      "floor": [[0.0, "1.0.0"], [20.3, "1.1.0"]],
      "machine": [[0.0, 1], [21.0, 2]],
      "summary": {"ok": 5100, "failed": 100, "indeterminate": 34,
                  "verdict": "linearizable", "path": ["1.0.0", "1.3.0"],
                  "roll": "rolled", "errors": [["TRYAGAIN ...", 80]],
                  "duration_s": 42.0, "final_releases": {"1": "1.3.0"}}
    }

The summary table is plain HTML (readable without JavaScript); the
timeline picture is drawn by the page's script from the same dict, which
the page carries as JSON. When the script has drawn it, it sets
data-rendered="ok" on <body> (and data-render-error with the message if
anything threw), so a headless browser's DOM dump shows whether it ran.
"""

import html
import json
from pathlib import Path

REQUIRED = ("t_end", "bucket_ms", "throughput", "nodes", "releases",
            "restarts", "leaders", "floor", "machine", "summary")


def check(timeline):
    """Raise ValueError naming what is missing or of the wrong kind."""
    if not isinstance(timeline, dict):
        raise ValueError(f"the timeline must be a dict, not "
                         f"{type(timeline).__name__}")
    missing = [k for k in REQUIRED if k not in timeline]
    if missing:
        raise ValueError(f"the timeline lacks {', '.join(missing)}")
    if not isinstance(timeline["throughput"], list):
        raise ValueError("throughput must be a list of counts per bucket")
    if not timeline["bucket_ms"] or timeline["bucket_ms"] <= 0:
        raise ValueError(f"bucket_ms must be positive, not "
                         f"{timeline['bucket_ms']!r}")
    json.dumps(timeline)  # raises TypeError on what JSON cannot hold


def _cell(value):
    return html.escape("" if value is None else str(value))


def _gap_text(gap_ms):
    return "no writes around it" if gap_ms is None else f"{gap_ms:.0f} ms"


def summary_rows(timeline):
    """(label, value, id) rows of the summary table."""
    s = timeline["summary"]
    total = s.get("ok", 0) + s.get("failed", 0) + s.get("indeterminate", 0)
    rows = [
        ("roll", " -> ".join(s.get("path", [])) + f" ({s.get('roll', '?')})",
         "sum-roll"),
        ("duration", f"{s.get('duration_s', timeline['t_end']):.1f} s",
         "sum-duration"),
        ("operations", str(total), "sum-total"),
        ("acknowledged (ok)", str(s.get("ok", 0)), "sum-ok"),
        ("failed (certainly not applied)", str(s.get("failed", 0)),
         "sum-failed"),
        ("indeterminate (may have applied)", str(s.get("indeterminate", 0)),
         "sum-indeterminate"),
        ("linearizability (baton-lincheck)", str(s.get("verdict", "?")),
         "sum-verdict"),
    ]
    for r in timeline["restarts"]:
        rows.append((f"longest write gap, t+{r['t']:.1f} s node {r['node']} "
                     f"restarted at {r['release']}",
                     _gap_text(r.get("gap_ms")), f"sum-gap-{len(rows)}"))
    for node, rel in sorted((s.get("final_releases") or {}).items()):
        rows.append((f"node {node} release at the end", str(rel),
                     f"sum-final-{node}"))
    for text, count in s.get("errors", []):
        rows.append((f"error: {text}", str(count), f"sum-error-{len(rows)}"))
    return rows


CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
p.lead { margin: 0 0 1em; color: #555; }
svg { width: 100%; max-width: 1100px; height: auto; border: 1px solid #ddd;
      background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
svg .axis line, svg .grid { stroke: #eee; }
svg .lane-label { font-weight: 600; }
svg .throughput { fill: none; stroke: #1f77b4; stroke-width: 1.5; }
svg .throughput-area { fill: #1f77b4; opacity: .12; }
svg .failed { fill: none; stroke: #d62728; stroke-width: 1; }
svg .restart-line { stroke: #999; stroke-dasharray: 3 3; }
svg .restart { fill: #000; }
svg .down { fill: url(#hatch); }
svg .lead-seg { fill: #222; }
svg .leader-change { fill: #ff7f0e; stroke: #222; }
svg .floor-change { fill: #2ca02c; }
svg .machine-change { fill: #9467bd; }
svg .step { fill: none; stroke-width: 2; }
table { border-collapse: collapse; margin-top: 1em; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#legend span { display: inline-block; margin-right: 1em; }
#legend i { display: inline-block; width: 12px; height: 12px;
            margin-right: 4px; vertical-align: -2px; }
#status { color: #777; font-size: 12px; }
"""

# The picture: lanes from top to bottom (throughput, one per node with its
# release and leadership, leader changes, floor, machine version), one x
# axis in seconds, a dashed line at every restart through all lanes.
SCRIPT = r"""
(function () {
  "use strict";
  window.addEventListener("error", function (e) {
    document.body.setAttribute("data-render-error", String(e.message));
  });
  var T = JSON.parse(document.getElementById("timeline-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var svg = document.getElementById("timeline");
  var W = 1100, L = 120, R = 20, laneH = 34, tpH = 130;
  var nodes = T.nodes.map(String);
  var top = 10, rows = {};
  rows.tp = top; top += tpH + 14;
  nodes.forEach(function (n) { rows["n" + n] = top; top += laneH; });
  rows.leader = top; top += laneH;
  rows.floor = top; top += laneH;
  rows.machine = top; top += laneH;
  var H = top + 34;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  var tEnd = Math.max(T.t_end, 0.001);
  function x(t) { return L + (W - L - R) * Math.min(Math.max(t, 0), tEnd) / tEnd; }
  function el(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    (parent || svg).appendChild(e);
    return e;
  }
  function tip(e, text) { el("title", {}, e, text); return e; }
  function label(y, text) {
    el("text", {x: 8, y: y + laneH / 2 + 4, "class": "lane-label"}, svg, text);
  }

  var defs = el("defs", {});
  var pat = el("pattern", {id: "hatch", width: 6, height: 6,
    patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)"}, defs);
  el("rect", {width: 6, height: 6, fill: "#f4f4f4"}, pat);
  el("line", {x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#bbb", "stroke-width": 2}, pat);

  // Time axis and grid.
  var axis = el("g", {"class": "axis"});
  var step = tEnd > 120 ? 20 : tEnd > 40 ? 10 : tEnd > 15 ? 5 : 1;
  for (var t = 0; t <= tEnd + 1e-9; t += step) {
    el("line", {x1: x(t), x2: x(t), y1: 10, y2: top, "class": "grid"}, axis);
    el("text", {x: x(t), y: top + 16, "text-anchor": "middle"}, axis, t + " s");
  }

  // Release colours, in order of release.
  var releases = [];
  Object.keys(T.releases).forEach(function (n) {
    T.releases[n].forEach(function (p) {
      if (p[1] !== null && releases.indexOf(p[1]) < 0) releases.push(p[1]);
    });
  });
  T.floor.forEach(function (p) {
    if (releases.indexOf(p[1]) < 0) releases.push(p[1]);
  });
  function relKey(r) { return r.split(".").map(function (v) {
    return ("000" + v).slice(-4); }).join("."); }
  releases.sort(function (a, b) { return relKey(a) < relKey(b) ? -1 : 1; });
  var palette = ["#c6dbef", "#6baed6", "#2171b5", "#08306b", "#74c476", "#fd8d3c"];
  function colour(r) { return palette[releases.indexOf(r) % palette.length]; }
  var legend = document.getElementById("legend");
  releases.forEach(function (r) {
    var s = document.createElement("span");
    var i = document.createElement("i");
    i.style.background = colour(r);
    s.appendChild(i);
    s.appendChild(document.createTextNode("release " + r));
    legend.appendChild(s);
  });

  // Throughput: acknowledged operations per bucket, and the failed ones.
  var bucket = T.bucket_ms / 1000;
  var tp = T.throughput, most = 1;
  tp.forEach(function (v) { most = Math.max(most, v); });
  (T.failed || []).forEach(function (v) { most = Math.max(most, v); });
  function y(v) { return rows.tp + tpH - tpH * v / most; }
  label(rows.tp, "ops / " + T.bucket_ms + " ms");
  el("text", {x: L - 6, y: rows.tp + 10, "text-anchor": "end"}, svg, String(most));
  el("text", {x: L - 6, y: rows.tp + tpH, "text-anchor": "end"}, svg, "0");
  function pathOf(values) {
    return values.map(function (v, k) {
      return (k ? "L" : "M") + x((k + 0.5) * bucket).toFixed(1) + " " + y(v).toFixed(1);
    }).join(" ");
  }
  if (tp.length) {
    var d = pathOf(tp);
    el("path", {d: d + " L" + x((tp.length - 0.5) * bucket).toFixed(1) + " " + y(0) +
      " L" + x(0.5 * bucket).toFixed(1) + " " + y(0) + " Z", "class": "throughput-area"});
    tip(el("path", {id: "throughput", d: d, "class": "throughput",
      "data-points": tp.length}), "acknowledged operations per " + T.bucket_ms + " ms");
  }
  if (T.failed && T.failed.some(function (v) { return v > 0; })) {
    tip(el("path", {id: "failed", d: pathOf(T.failed), "class": "failed",
      "data-points": T.failed.length}), "failed or indeterminate operations per " +
      T.bucket_ms + " ms");
  }

  // Node lanes: release over time (hatched: not running), leadership
  // as a dark bar under the lane, a marker at each restart.
  nodes.forEach(function (n) {
    var y0 = rows["n" + n];
    label(y0, "node " + n);
    var segs = T.releases[n] || [];
    segs.forEach(function (p, k) {
      var t1 = k + 1 < segs.length ? segs[k + 1][0] : tEnd;
      var r = el("rect", {x: x(p[0]), y: y0 + 4, width: Math.max(x(t1) - x(p[0]), 0.5),
        height: laneH - 14, "class": p[1] === null ? "down" : "release-seg",
        "data-node": n, "data-release": p[1] === null ? "down" : p[1]});
      if (p[1] !== null) r.setAttribute("fill", colour(p[1]));
      tip(r, "node " + n + ": " + (p[1] === null ? "not running" : "release " + p[1]) +
        " from t+" + p[0].toFixed(1) + " s to t+" + t1.toFixed(1) + " s");
    });
    T.leaders.forEach(function (ld, k) {
      if (String(ld.node) !== n) return;
      var t1 = k + 1 < T.leaders.length ? T.leaders[k + 1].t : tEnd;
      tip(el("rect", {x: x(ld.t), y: y0 + laneH - 9, width: Math.max(x(t1) - x(ld.t), 0.5),
        height: 4, "class": "lead-seg", "data-node": n}),
        "node " + n + " leads, term " + ld.term + " (t+" + ld.t.toFixed(1) + " s)");
    });
  });
  T.restarts.forEach(function (r) {
    var y0 = rows["n" + r.node];
    el("line", {x1: x(r.t), x2: x(r.t), y1: 10, y2: top, "class": "restart-line"});
    if (y0 === undefined) return;
    var cx = x(r.t), cy = y0 + 4;
    tip(el("path", {d: "M" + (cx - 5) + " " + (cy - 4) + " L" + (cx + 5) + " " + (cy - 4) +
      " L" + cx + " " + (cy + 4) + " Z", "class": "restart", "data-node": r.node,
      "data-release": r.release}),
      "t+" + r.t.toFixed(1) + " s: node " + r.node + " restarted at " + r.release +
      "; longest write gap " + (r.gap_ms === null || r.gap_ms === undefined ?
      "(no writes)" : Math.round(r.gap_ms) + " ms"));
  });

  // Leader changes, release floor, machine version.
  label(rows.leader, "leader");
  T.leaders.forEach(function (ld, k) {
    var g = el("g", {"class": "leader-change", "data-node": ld.node});
    el("circle", {cx: x(ld.t), cy: rows.leader + 12, r: 5}, g);
    el("text", {x: x(ld.t) + 7, y: rows.leader + 16}, g, "n" + ld.node);
    tip(g, "t+" + ld.t.toFixed(1) + " s: node " + ld.node + " leads (term " +
      ld.term + ", release " + ld.release + ")");
  });
  function steps(row, points, cls, name, stroke) {
    label(row, name);
    var d = "";
    points.forEach(function (p, k) {
      var t1 = k + 1 < points.length ? points[k + 1][0] : tEnd;
      d += "M" + x(p[0]).toFixed(1) + " " + (row + 12) + " L" + x(t1).toFixed(1) + " " + (row + 12) + " ";
      var g = el("g", {"class": cls, "data-value": p[1]});
      el("rect", {x: x(p[0]) - 4, y: row + 8, width: 8, height: 8}, g);
      el("text", {x: x(p[0]) + 7, y: row + 28}, g, String(p[1]));
      tip(g, "t+" + p[0].toFixed(1) + " s: " + name + " " + p[1]);
    });
    if (d) el("path", {d: d, "class": "step", stroke: stroke});
  }
  steps(rows.floor, T.floor, "floor-change", "release floor", "#2ca02c");
  steps(rows.machine, T.machine, "machine-change", "machine version", "#9467bd");

  var counts = ["restart", "leader-change", "floor-change", "machine-change"].map(
    function (c) { return svg.getElementsByClassName(c).length + " " + c; });
  document.getElementById("status").textContent = "drawn: " + counts.join(", ") +
    ", " + tp.length + " throughput points";
  document.body.setAttribute("data-rendered", "ok");
})();
"""


def render(timeline):
    """The page's text (raises ValueError for a malformed timeline)."""
    check(timeline)
    title = timeline.get("title") or "baton rolling upgrade"
    rows = "\n".join(
        f'<tr><th>{_cell(label)}</th><td class="num" id="{_cell(rid)}">'
        f"{_cell(value)}</td></tr>" for label, value, rid in
        summary_rows(timeline))
    # "</" cannot end the script element early: JSON allows "<\/".
    data = json.dumps(timeline, sort_keys=True).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{_cell(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{_cell(title)}</h1>
<p class="lead">Client operations over time while the cluster rolled, node by
node, to a newer release. Top: acknowledged operations per
{_cell(timeline['bucket_ms'])} ms (blue) and failed or indeterminate ones
(red). Below, one lane per node, coloured by the release it runs (hatched:
not running), with a triangle where it was restarted and a dark bar while it
leads; then each leader change, the release floor and the effective machine
version. Hover over any mark for details. The clients spread their
operations over all nodes, and one that finds a node down waits 50 ms
before its next try: that, not a pause of the cluster, is most of the dip
in throughput at each restart; the longest write gaps in the table say how
long acknowledged writes stopped.</p>
<div id="legend"></div>
<svg id="timeline" xmlns="http://www.w3.org/2000/svg" role="img"
 aria-label="timeline of the rolling upgrade"></svg>
<noscript><p>The timeline picture needs JavaScript; the table below does
not.</p></noscript>
<p id="status">not drawn (the script did not run)</p>
<table id="summary">
{rows}
</table>
<script type="application/json" id="timeline-data">{data}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""


def write(timeline, path):
    path = Path(path)
    path.write_text(render(timeline), encoding="utf-8")
    return path
