"""The script of the page at ``GET /`` (inlined into it), kept apart from the HTML.

Three jobs: keep the builder and the problem JSON in step (the builder writes its fields into the
JSON and leaves every other field as written; a hand edit of the JSON fills the builder back),
solve the problem with two methods at once through ``POST /v1/solve`` (following a 202 job),
and show the two results: a table of their figures and, per method, the downloads and the chart.
"""

from __future__ import annotations

#: Inlined between <script> tags: must never contain a closing script tag.
SCRIPT = r"""
"use strict";
const $ = (id) => document.getElementById(id);
const esc = (x) => String(x).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const INTS = ["devices", "microbatches", "stages_per_device"];
const COSTS = ["forward", "backward_input", "backward_weight", "comm"];
const RUNS = [{id: "run-a", select: "method-a", fallback: "1f1b"}, {id: "run-b", select: "method-b", fallback: "auto"}];

// ---------------------------------------------------------------- builder <-> JSON
function parseLimit(text) {
  const t = text.trim();
  if (t === "") return null;
  const parts = t.split(/[\s,]+/).filter((x) => x !== "");
  if (parts.every((x) => !isNaN(Number(x)))) return parts.length === 1 ? Number(parts[0]) : parts.map(Number);
  return t;  // not numbers: sent as written, and the service says what is wrong with it
}

function readJson() {
  try { const p = JSON.parse($("problem").value); return p && typeof p === "object" ? p : null; }
  catch (e) { return null; }
}

function number(id) { const v = $(id).value.trim(); return v === "" ? null : Number(v); }

const MEMORY_DEFAULTS = {forward: 1, backward_input: 0, backward_weight: -1};

function setField(problem, id) {
  if (INTS.includes(id)) problem[id] = number(id);
  else if (id === "placement" || id === "objective") problem[id] = $(id).value;
  else if (id === "split_backward") problem[id] = $(id).checked;
  else if (COSTS.includes(id)) problem.costs = {...(problem.costs || {}), [id]: number(id)};
  else if (id === "limit") problem.memory = {...MEMORY_DEFAULTS, ...(problem.memory || {}), limit: parseLimit($(id).value)};
}

// Write what the builder changed into the JSON and keep the rest as written (per-stage lists,
// memory deltas); when the JSON does not parse, write the whole builder instead.
function writeJson(ids) {
  let problem = readJson();
  if (!problem) {
    problem = {};
    ids = [...INTS, "placement", "split_backward", "objective", ...COSTS, "limit"];
  }
  for (const id of ids) setField(problem, id);
  $("problem").value = JSON.stringify(problem, null, 2);
  $("problem-error").textContent = "";
}

function fillBuilder() {
  const p = readJson();
  $("problem-error").textContent = p ? "" : "not valid JSON yet";
  if (!p) return;
  const scalar = (x) => typeof x === "number" || typeof x === "string";
  for (const f of INTS) if (scalar(p[f])) $(f).value = p[f];
  if (p.placement) $("placement").value = p.placement;
  if (p.objective) $("objective").value = p.objective;
  $("split_backward").checked = p.split_backward !== false;
  for (const f of COSTS) {
    const v = (p.costs || {})[f];
    $(f).value = scalar(v) ? v : (v === undefined ? "" : $(f).value);
    $(f).title = Array.isArray(v) ? "per-stage list in the JSON; typing here replaces it" : "";
  }
  const limit = (p.memory || {}).limit;
  $("limit").value = limit === null || limit === undefined ? "" : (Array.isArray(limit) ? limit.join(", ") : limit);
}

function builderChanged(event) {
  const ids = [event.target.id];
  if (event.target.id === "placement" && $("placement").value === "v") {
    $("stages_per_device").value = 2;  // the V placement holds two chunks per device
    ids.push("stages_per_device");
  }
  writeJson(ids);
}

// ---------------------------------------------------------------- solving
function describe(data) {
  if (data && data.error) return data.error;
  if (data && typeof data.detail === "string") return data.detail;
  return JSON.stringify(data && data.detail !== undefined ? data.detail : data);
}

async function poll(job, run) {
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    const j = await (await fetch(`/v1/jobs/${job}`)).json();
    run.querySelector("h2").textContent = `${run.dataset.method}: ${j.state}...`;
    if (j.state === "done") return j.result;
    if (j.state === "failed") throw new Error(j.error || "the solve failed");
  }
}

async function solveOne(problem, method, run) {
  const body = {problem, method, time_limit_s: Number($("time_limit").value), wait_s: 5};
  const headers = {"content-type": "application/json"};
  if ($("token").value) headers.authorization = "Bearer " + $("token").value;
  const r = await fetch("/v1/solve", {method: "POST", headers, body: JSON.stringify(body)});
  const data = await r.json();
  if (r.status === 202) return await poll(data.job, run);
  if (!r.ok) throw new Error(describe(data));
  return data;
}

// ---------------------------------------------------------------- showing
const fig = (x) => (x === null || x === undefined ? "–" : String(Number(Number(x).toPrecision(6))));
const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%");
const maxOf = (xs) => (xs && xs.length ? Math.max(...xs) : null);

function showFigures(results) {
  const rows = [
    ["status", (s) => esc(s.status + (s.reason ? ` (${s.reason})` : "")), null],
    ["schedule from", (s) => esc(s.method), null],
    ["bubble", (s) => pct(s.bubble_ratio), (s) => s.bubble_ratio],
    ["peak memory (highest device)", (s) => fig(maxOf(s.peak_memory)), (s) => maxOf(s.peak_memory)],
    ["peak memory per device", (s) => s.peak_memory.map(fig).join(", ") || "–", null],
    ["makespan", (s) => fig(s.makespan), (s) => s.makespan],
    ["objective", (s) => fig(s.objective_value), (s) => s.objective_value],
    ["lower bound", (s) => fig(s.lower_bound), null],
    ["solve time (s)", (s) => fig(s.solve_time_s), null],
  ];
  const head = "<tr><th></th>" + results.map((r) => `<th>${esc(r.method)}</th>`).join("") + "</tr>";
  const body = rows.map(([name, text, value]) => {
    const values = results.map((r) => (r.result && value ? value(r.result.schedule) : null));
    const known = values.filter((v) => v !== null && v !== undefined);
    const best = known.length === results.length && known.length > 1 ? Math.min(...known) : null;
    const cells = results.map((r, i) => {
      if (!r.result) return `<td>–</td>`;
      const mark = best !== null && values[i] <= best + 1e-9 * Math.max(1, Math.abs(best)) ? ' class="best"' : "";
      return `<td${mark}>${text(r.result.schedule)}</td>`;
    });
    return `<tr><th>${name}</th>${cells.join("")}</tr>`;
  });
  $("figures").innerHTML = head + body.join("");
}

async function showRun(run, method, result) {
  const s = result.schedule;
  run.querySelector("h2").textContent = `${method}: ${s.status}` + (s.bubble_ratio !== null ? `, bubble ${pct(s.bubble_ratio)}` : "");
  const base = `/v1/schedules/${result.key}`;
  const q = `?method=${encodeURIComponent(s.method)}`;
  const links = [[`${base}/schedule.json${q}`, `schedule-${method}.json`, "schedule JSON"]];
  if (s.ops.length) {
    links.push([`${base}/torch.csv${q}`, `schedule-${method}.csv`, "torch CSV"]);
    links.push([`${base}/gantt.svg${q}`, `gantt-${method}.svg`, "Gantt SVG"]);
  }
  run.querySelector(".downloads").innerHTML = "Download: " +
    links.map(([href, name, text]) => `<a href="${esc(href)}" download="${esc(name)}">${text}</a>`).join("");
  const chart = run.querySelector(".chart");
  if (!s.ops.length) { chart.innerHTML = ""; return; }
  const r = await fetch(`${base}/gantt.svg${q}`);
  if (!r.ok) throw new Error(`chart: ${describe(await r.json())}`);
  chart.innerHTML = await r.text();
  const svg = chart.querySelector("svg");
  svg.removeAttribute("width"); svg.removeAttribute("height");  // scale to the column (viewBox kept)
}

async function solveAll() {
  let problem;
  try { problem = JSON.parse($("problem").value); }
  catch (e) { $("problem-error").textContent = "the problem is not valid JSON: " + e.message; return; }
  $("problem-error").textContent = ""; $("figures").innerHTML = ""; $("state").textContent = "solving...";
  $("solve").disabled = true;
  const results = await Promise.all(RUNS.map(async (spec) => {
    const run = $(spec.id), method = $(spec.select).value;
    run.dataset.method = method;
    run.querySelector("h2").textContent = `${method}: solving...`;
    for (const sel of [".run-error", ".downloads", ".chart"]) run.querySelector(sel).textContent = "";
    try {
      const result = await solveOne(problem, method, run);
      await showRun(run, method, result);
      return {method, result};
    } catch (e) {
      run.querySelector("h2").textContent = `${method}: no schedule`;
      run.querySelector(".run-error").textContent = String(e.message || e);
      return {method, result: null};
    }
  }));
  showFigures(results);
  $("state").textContent = ""; $("solve").disabled = false;
}

// ---------------------------------------------------------------- start
fetch("/v1/methods").then((r) => r.json()).then((methods) => {
  for (const spec of RUNS) {
    $(spec.select).replaceChildren(...methods.map((m) => Object.assign(document.createElement("option"),
                                                                      {textContent: m.name, title: m.summary})));
    if (methods.some((m) => m.name === spec.fallback)) $(spec.select).value = spec.fallback;
  }
});
fillBuilder();
$("builder").addEventListener("input", builderChanged);
$("builder").addEventListener("change", builderChanged);
$("problem").addEventListener("input", fillBuilder);
$("solve").addEventListener("click", solveAll);
"""
