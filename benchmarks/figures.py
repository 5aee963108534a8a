"""The named figures of each benchmark's page: what the README quotes, read back from the page itself.

``report.publish`` writes ``figures`` into the JSON beside every results file; for the scripts listed
in ``EXTRACTORS`` it computes them here from the tables and summary lines the script has just
written, so the figure the README quotes and the row it comes from cannot disagree, and no script
needs a second copy of its arithmetic. ``python benchmarks/report.py --refigure FILE.md`` recomputes
them for a page written before its extractor existed (same function, same page: no re-run needed).

Each extractor takes the page's markdown and returns a flat or nested dict of numbers; a field whose
row is absent (a ``--only`` run, a smaller ``--quick`` table) is left out, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from report import tables

Figures = dict[str, Any]
_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


def num(cell: Any) -> float | None:
    """The first number in a cell (``"+5.41%"`` -> 5.41, ``"8.1 vs 2.7"`` -> 8.1), None when none."""
    if isinstance(cell, int | float):
        return float(cell)
    found = _NUM.search(str(cell))
    return float(found.group(0)) if found else None


def rows(text: str, column: str) -> list[dict[str, Any]]:
    """The rows of the first table with a column named ``column``, as dicts; a repeated column name
    gets ``#2``, ``#3`` (the second ``gap`` of a table with two time limits is ``gap#2``)."""
    for table in tables(text):
        if column not in table["columns"]:
            continue
        names, seen = [], {}
        for name in table["columns"]:
            seen[name] = seen.get(name, 0) + 1
            names.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
        return [dict(zip(names, row, strict=False)) for row in table["rows"]]
    return []


def _ratio(text: str, pattern: str) -> tuple[int, int] | None:
    found = re.search(pattern + r"\s*(\d+)\s*(?:/|of)\s*(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _range(values: list[float], name: str) -> Figures:
    return {f"{name}_min": round(min(values), 4), f"{name}_max": round(max(values), 4)} if values else {}


# --------------------------------------------------------------------------------------------------

def zb_paper(text: str) -> Figures:
    out: Figures = {}
    table = rows(text, "vs published")
    for cap in ("1p", "2p"):
        mine = [r for r in table if r["limit"] == cap]
        if mine:
            out[cap] = {"cases": len(mine),
                        "optimal": sum(r["status"] == "optimal" for r in mine),
                        "optimal_equal": sum(r["status"] == "optimal" and r["vs published"] == "equal" for r in mine),
                        "better": sum(r["vs published"] == "better" for r in mine),
                        "equal": sum(r["vs published"] == "equal" for r in mine),
                        "worse": sum(r["vs published"] == "WORSE" for r in mine)}
    if table:
        out["slowest_s"] = max(num(r["time (s)"]) or 0.0 for r in table)
    return out


def plan(text: str) -> Figures:
    out: Figures = {}
    table = rows(text, "vs unif.")
    gains = [x for x in (num(r["vs unif."]) for r in table) if x is not None]
    if gains:
        out["max_gain_vs_uniform_pct"] = max(gains)
    for name, pattern in (("no_slower", r"plan <= the best baseline:"),
                          ("faster_than_uniform", r"faster than uniform where uniform is > \d+% imbalanced:"),
                          ("beats_adapipe_tight", r"strictly faster than the AdaPipe-style DP on the tight cases:"),
                          ("near_bound", r"within \d+% of the lower bound:"),
                          ("valid", r"every plan validates and fits memory:")):
        found = _ratio(text, pattern)
        if found:
            out[name], out[f"{name}_of"] = found
    return out


def v_placement(text: str) -> Figures:
    out: Figures = {}
    table = rows(text, "zb-v")
    gap = "gap#2" if table and "gap#2" in table[0] else "gap"
    gaps = [num(r[gap]) for r in table if num(r[gap]) is not None]
    out.update(_range(gaps, "gap_pct"))
    if gaps:
        out["cases"], out["gap_within_2pct"] = len(gaps), sum(g <= 2.0 for g in gaps)
    found = re.search(r"at least ([\d.]+)% better than zb-v on (\d+) of (\d+) cases and worse on (\d+)", text)
    if found:
        out["better"], out["better_of"], out["worse"] = int(found.group(2)), int(found.group(3)), int(found.group(4))
    return out


def anchors(text: str) -> Figures:
    out: Figures = {}
    table = rows(text, "family")
    auto = [c for c in (table[0] if table else {}) if c.startswith("auto ")]
    for family in sorted({r["family"] for r in table}):
        mine = [r for r in table if r["family"] == family]
        faster = [-(num(str(r[auto[-1]]).rsplit("·", 1)[-1]) or 0.0) for r in mine] if auto else []
        gaps = [num(r["gap"]) for r in mine if num(r["gap"]) is not None]
        out[family] = {"cases": len(mine), **_range(faster, "faster_pct"), **_range(gaps, "gap_pct"),
                       "gap_within_3pct": sum(g <= 3.0 for g in gaps)}
    return out


def large_problems(text: str) -> Figures:
    out: Figures = {}
    for r in rows(text, "gap 10/60"):
        p = re.search(r"p(\d+) m", str(r["case"]))
        if not p:
            continue
        key = f"p{p.group(1)}"
        gap, mb = num(r["gap 10/60"]), num(str(r["auto 60 s"]).rsplit("/", 1)[-1])
        entry = out.setdefault(key, {"gap_10_60_max_pct": gap, "peak_mb": mb})
        entry["gap_10_60_max_pct"] = max(entry["gap_10_60_max_pct"], gap)
        entry["peak_mb"] = max(entry["peak_mb"], mb)
    return out


def time_limits_under_load(text: str) -> Figures:
    table = rows(text, "within")
    if not table:
        return {}
    fits = [r for r in table if "is below the estimated" not in str(r["reason"])]
    return {"solves": len(table), "fit": len(fits), "fit_within": sum(r["within"] == "yes" for r in fits),
            "not_fit": len(table) - len(fits), "over": sum(r["within"] != "yes" for r in table)}


def fidelity(text: str) -> Figures:
    out: Figures = {}
    for p in sorted({int(num(r["p"]) or 0) for r in rows(text, "method")}):
        mine = [r for r in rows(text, "method") if int(num(r["p"]) or 0) == p]
        errors = [num(r["error"]) for r in mine if num(r["error"]) is not None]
        stages = [num(r["its error"]) for r in mine if num(r.get("its error")) is not None]
        entry: Figures = {"methods": len(errors), "within_15pct": sum(abs(e) <= 15.0 for e in errors),
                          **_range(errors, "error_pct"),
                          "within_15pct_from_stages": sum(abs(e) <= 15.0 for e in stages)}
        pairs = _ratio(text, rf"- p = {p}:") if re.search(rf"- p = {p}: \d+ of \d+ pairs", text) else None
        if pairs:
            entry["pairs_in_order"], entry["pairs"] = pairs
        split = re.search(rf"- p = {p}: split .*?gain [\d.]+ ms \(\+([\d.]+)%\).*?median gain [-\d.]+ ms \(([-+\d.]+)%\)",
                          text)
        if split:
            entry["split_gain_predicted_pct"], entry["split_gain_measured_pct"] = float(split.group(1)), float(split.group(2))
        out[f"p{p}"] = entry
    return out


def host_memory(text: str) -> Figures:
    table = rows(text, "method")
    cols = list(table[0]) if table else []
    errors = [c for c in cols if c.startswith("error")]
    if len(errors) < 2:
        return {}
    default = [num(r[errors[0]]) for r in table]
    keep = [num(r[errors[1]]) for r in table]
    steps = [c for c in cols if "measured" in c]
    shorter = sum(num(str(r[steps[1]]).split("/")[-1]) < num(str(r[steps[0]]).split("/")[-1]) for r in table)
    return {"methods": len(table), **_range(default, "default_error_pct"), **_range(keep, "keep_error_pct"),
            "keep_shorter": shorter}


def scale_out(text: str) -> Figures:
    out: Figures = {}
    for r in rows(text, "question"):
        q, ratio = str(r["question"]), num(r.get("ratio"))
        if q.startswith("solves/s, 2 workers vs 1"):
            out["workers_2_vs_1"] = ratio
        elif q.startswith("cache-hit p99 on B") and "--nice idle" in q:
            out["hit_p99_busy_vs_idle"] = ratio
        elif q.startswith("batch of 200 (greedy): --engine ray on a running cluster"):
            out["ray_vs_jobs2"] = ratio
    return out


def runtime_vs_torch(text: str) -> Figures:
    ratios = [num(r["ours / torch"]) for r in rows(text, "ours / torch")]
    return {"methods": len(ratios), **_range([x for x in ratios if x is not None], "ours_over_torch")}


#: Script (as the page's command names it) -> its extractor.
EXTRACTORS: dict[str, Callable[[str], Figures]] = {
    "zb_paper.py": zb_paper, "plan.py": plan, "v_placement.py": v_placement, "anchors.py": anchors,
    "large_problems.py": large_problems, "time_limits_under_load.py": time_limits_under_load,
    "fidelity.py": fidelity, "host_memory.py": host_memory, "scale_out.py": scale_out,
    "runtime_vs_torch.py": runtime_vs_torch,
}


def script_of(text: str) -> str | None:
    """The benchmark script a page says made it (``Made by `python benchmarks/X.py ...```)."""
    found = re.search(r"`python benchmarks/(\w+\.py)", text)
    return found.group(1) if found else None


def derived(text: str) -> Figures:
    """The figures of a page whose script has an extractor (empty otherwise)."""
    extractor = EXTRACTORS.get(script_of(text) or "")
    return extractor(text) if extractor else {}

