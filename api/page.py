"""``GET /``: one HTML page to paste a problem, solve it, and see the summary and Gantt chart.

Plain HTML and a few lines of JavaScript against the public API; no build step.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["page"])

_EXAMPLE = """{
  "devices": 4,
  "microbatches": 8,
  "stages_per_device": 1,
  "placement": "loop",
  "split_backward": true,
  "costs":  {"forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0, "comm": 0.0},
  "memory": {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": null},
  "objective": "makespan"
}"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pipesched</title>
<style>
 body { font: 14px system-ui, sans-serif; margin: 1.5em; max-width: 72em; }
 textarea { width: 100%; height: 16em; font: 13px monospace; }
 table { border-collapse: collapse; margin: .8em 0; } td { padding: .15em .8em .15em 0; }
 #error { color: #b00020; white-space: pre-wrap; } #gantt img { max-width: 100%; border: 1px solid #ddd; }
</style></head>
<body>
<h1>pipesched</h1>
<p>Paste a problem (JSON), pick a method, solve. API docs: <a href="/docs">/docs</a>.</p>
<textarea id="problem">__EXAMPLE__</textarea>
<p>
 <label>method <select id="method"><option>auto</option></select></label>
 <label>time limit (s) <input id="limit" type="number" value="10" min="0.1" step="0.1" style="width:5em"></label>
 <label>token <input id="token" type="password" placeholder="if the service has one"></label>
 <button id="solve">Solve</button> <span id="state"></span>
</p>
<div id="error"></div>
<table id="summary"></table>
<div id="gantt"></div>
<script>
const $ = (id) => document.getElementById(id);
fetch("/v1/methods").then(r => r.json()).then(ms => {
  $("method").innerHTML = ms.map(m => `<option title="${m.summary}">${m.name}</option>`).join("");
  if (ms.some(m => m.name === "auto")) $("method").value = "auto";
});
function show(result) {
  const s = result.schedule, fig = (x) => x === null || x === undefined ? "-" : (+x).toFixed(3);
  const rows = [["status", s.status + (s.reason ? " (" + s.reason + ")" : "")], ["method", s.method],
    ["objective", fig(s.objective_value)], ["makespan", fig(s.makespan)], ["lower bound", fig(s.lower_bound)],
    ["bubble ratio", fig(s.bubble_ratio)], ["peak memory", s.peak_memory.map(fig).join(", ")],
    ["solve time (s)", fig(s.solve_time_s)], ["from cache", result.cached], ["key", result.key]];
  $("summary").innerHTML = rows.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("");
  $("gantt").innerHTML = s.ops.length ? `<img alt="Gantt chart" src="/v1/schedules/${result.key}/gantt.svg?method=${encodeURIComponent($("method").value)}">` : "";
}
async function poll(job) {
  while (true) {
    await new Promise(r => setTimeout(r, 1000));
    const j = await (await fetch(`/v1/jobs/${job}`)).json();
    $("state").textContent = j.state + "...";
    if (j.state === "done") return j.result;
    if (j.state === "failed") throw new Error(j.error);
  }
}
$("solve").onclick = async () => {
  $("error").textContent = ""; $("summary").innerHTML = ""; $("gantt").innerHTML = ""; $("state").textContent = "solving...";
  try {
    const body = {problem: JSON.parse($("problem").value), method: $("method").value,
                  time_limit_s: +$("limit").value, wait_s: 5};
    const headers = {"content-type": "application/json"};
    if ($("token").value) headers.authorization = "Bearer " + $("token").value;
    const r = await fetch("/v1/solve", {method: "POST", headers, body: JSON.stringify(body)});
    const data = await r.json();
    if (r.status === 202) show(await poll(data.job));
    else if (r.ok) show(data);
    else throw new Error(data.error || (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)));
    $("state").textContent = "";
  } catch (e) { $("error").textContent = String(e.message || e); $("state").textContent = ""; }
};
</script>
</body></html>
""".replace("__EXAMPLE__", _EXAMPLE)


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index() -> HTMLResponse:
    return HTMLResponse(PAGE)
