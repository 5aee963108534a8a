"""``GET /``: one page to build a problem, solve it with two methods and compare them.

Plain HTML and a script (:mod:`.page_script`, inlined) against the public API; no build step and
nothing loaded from another host. The page has three parts (issue 13, item 11):

- a problem builder for the common fields (p, m, v, placement, backward, objective, costs,
  limit) that writes the problem JSON, which stays editable by hand and is what gets solved;
- two methods solved side by side (``1f1b`` and ``auto`` by default): a table of their figures
  (bubble, peak memory, makespan, bound) and both Gantt charts, inlined so their per-op
  tooltips work;
- for each method, download links for the schedule JSON, the torch CSV and the SVG.

The charts are the service's own SVG; their style rules are global once inlined, so the page's
own classes avoid the chart's one- and two-letter class names.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from .page_script import SCRIPT

router = APIRouter(tags=["page"])

_EXAMPLE = """{
  "devices": 4,
  "microbatches": 8,
  "stages_per_device": 1,
  "placement": "loop",
  "split_backward": true,
  "costs":  {"forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0, "comm": 0.0},
  "memory": {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 4},
  "objective": "makespan"
}"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pipesched</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="/docs-assets/favicon.png">
<style>
 body { font: 14px system-ui, sans-serif; margin: 1.2em 1.5em; color: #222; }
 h1 { margin: 0 0 .2em; } h2 { font-size: 1.1em; margin: .4em 0; }
 .intro { margin: 0 0 1em; color: #444; }
 #setup { display: grid; grid-template-columns: minmax(20em, 30em) 1fr; gap: 1.2em; align-items: start; }
 fieldset { border: 1px solid #ccc; border-radius: 4px; margin: 0; }
 .fields { display: grid; grid-template-columns: auto 1fr; gap: .35em .6em; align-items: center; }
 .fields input[type=number] { width: 6em; } .fields input[type=text] { width: 12em; }
 .hint { color: #666; font-size: 12px; grid-column: 1 / 3; margin-top: -.2em; }
 textarea { width: 100%; height: 19em; font: 13px monospace; box-sizing: border-box; }
 #controls { margin: 1em 0; display: flex; flex-wrap: wrap; gap: .6em 1.2em; align-items: center; }
 #controls button { font-size: 1em; padding: .3em 1em; }
 .problem-error, .run-error { color: #b00020; white-space: pre-wrap; }
 table.figures { border-collapse: collapse; margin: .8em 0; }
 table.figures th, table.figures td { padding: .2em .9em; border-bottom: 1px solid #eee; text-align: left; }
 table.figures td.best { font-weight: bold; }
 #runs { display: grid; grid-template-columns: 1fr 1fr; gap: 1.2em; }
 @media (max-width: 1100px) { #runs, #setup { grid-template-columns: 1fr; } }
 .run { min-width: 0; } .chart svg { width: 100%; height: auto; border: 1px solid #ddd; }
 .downloads a { margin-right: 1em; }
</style></head>
<body>
<h1>pipesched</h1>
<p class="intro">Build a problem (or edit its JSON), pick two methods, solve and compare them.
API docs: <a href="/docs">/docs</a> · <a href="/redoc">/redoc</a>.</p>
<div id="setup">
 <fieldset id="builder"><legend>Problem builder</legend>
  <div class="fields">
   <label for="devices">p devices</label><input id="devices" type="number" min="1" step="1">
   <label for="microbatches">m microbatches</label><input id="microbatches" type="number" min="1" step="1">
   <label for="stages_per_device">v stages per device</label><input id="stages_per_device" type="number" min="1" step="1">
   <label for="placement">placement</label>
   <select id="placement"><option value="loop">loop (stage s on device s mod p)</option>
    <option value="v">V (needs v = 2)</option></select>
   <label for="split_backward">split backward</label>
   <span><input id="split_backward" type="checkbox"> B and W as separate ops</span>
   <label for="objective">objective</label>
   <select id="objective"><option>makespan</option><option>stage_span</option></select>
   <label for="forward">cost F</label><input id="forward" type="number" min="0" step="any">
   <label for="backward_input">cost B</label><input id="backward_input" type="number" min="0" step="any">
   <label for="backward_weight">cost W</label><input id="backward_weight" type="number" min="0" step="any">
   <label for="comm">comm latency</label><input id="comm" type="number" min="0" step="any">
   <label for="limit">memory limit</label><input id="limit" type="text" placeholder="none">
   <span class="hint">Blank: no limit. One number for every device, one per device (4, 4, 3, 3),
    or a multiple of 1F1B's peak (1.5x1f1b). Memory is counted in forwards held (F +1, W &minus;1)
    unless the JSON says otherwise.</span>
  </div>
 </fieldset>
 <div><label for="problem">Problem JSON (what is solved; edit freely)</label>
  <textarea id="problem" spellcheck="false">__EXAMPLE__</textarea>
  <div id="problem-error" class="problem-error"></div></div>
</div>
<div id="controls">
 <label>method A <select id="method-a"><option>1f1b</option></select></label>
 <label>method B <select id="method-b"><option>auto</option></select></label>
 <label>time limit (s) <input id="time_limit" type="number" value="10" min="0.1" step="0.1" style="width:5em"></label>
 <label>token <input id="token" type="password" placeholder="if the service has one"></label>
 <button id="solve">Solve and compare</button> <span id="state"></span>
</div>
<table id="figures" class="figures"></table>
<div id="runs">
 <section class="run" id="run-a"><h2></h2><div class="run-error"></div><p class="downloads"></p><div class="chart"></div></section>
 <section class="run" id="run-b"><h2></h2><div class="run-error"></div><p class="downloads"></p><div class="chart"></div></section>
</div>
<script>__SCRIPT__</script>
</body></html>
""".replace("__EXAMPLE__", _EXAMPLE).replace("__SCRIPT__", SCRIPT)


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index() -> HTMLResponse:
    return HTMLResponse(PAGE)
