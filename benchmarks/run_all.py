"""Regenerate the results files behind the README's figures, one benchmark at a time.

Each step is the exact command the README quotes, so its results file is the one the README links
to; ``tests/test_readme_figures.py`` then says which README figures no longer match (run at the
end). Benchmarks run one after another, never side by side: they measure time, and this machine
has two cores.

``--quick`` runs the steps whose README command finishes in a few minutes at most (their total is
in ``results/run_all.md`` after a run); ``--full`` adds the long ones: the zero-bubble paper cases
(24 solves of up to 60 s), the held-out table (24 solves of 10 s), the tuning and development
tables (48 solves of 10 s; ``--quick`` runs 6 of each set into ``development_quick.md``) and the zero-bubble grid's tuning, every unit-cost limit, the placements, determinism, the ILP comparisons,
CP-SAT's clock on the paper cases, the torch runtime, the anchors against torch's orders, the V placement,
DualPipe, planning, scale-out and cost-model fidelity tables. ``--list`` prints the plan.

``--stale`` runs exactly the steps whose results files the README or a docs page links and that are
not current: no ``commit:`` header, no JSON beside them, a README figure whose JSON field is missing,
or (README-linked) more than ``MAX_CODE_COMMITS`` commits touching ``solver/``, ``api/`` or
``runtime/`` since the commit they name (``tests/test_results_current.py`` holds the same rule).

    python benchmarks/run_all.py --quick | --full | --stale [--only NAME[,NAME]] [--list]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import readme_figures  # noqa: E402
from report import publish, read_header  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
#: A README-linked results file is current while at most this many commits touching ``CODE_PATHS``
#: came after the commit it names.
MAX_CODE_COMMITS = 30
CODE_PATHS = ("solver", "api", "runtime")
#: No step should take longer than this; one that does is stopped and reported as failed.
STEP_TIMEOUT_S = 3 * 3600


@dataclass(frozen=True)
class Step:
    name: str
    args: tuple[str, ...]  # after ``python benchmarks/``
    results: tuple[str, ...]  # files under benchmarks/results/
    quick: bool  # part of --quick (about a minute or less)

    @property
    def command(self) -> str:
        return "python benchmarks/" + " ".join(self.args)


STEPS: tuple[Step, ...] = (
    Step("classic", ("classic_table.py",), ("classic.md",), True),
    Step("bubble_closed_forms", ("bubble_closed_forms.py",), ("bubble_closed_forms.md",), True),
    Step("greedy_vs_recipes", ("greedy_vs_recipes.py", "60", "3"), ("greedy_vs_recipes.md",), True),
    Step("greedy_speed", ("greedy_speed.py",), ("greedy_speed.md",), True),
    Step("bound_tightness", ("bound_tightness.py",), ("bound_tightness.md",), True),
    Step("cpsat_dtime", ("cpsat_dtime.py",), ("cpsat_dtime.md",), True),
    Step("auto_time_limits", ("auto_time_limits.py",), ("auto_time_limits.md",), True),
    Step("time_limits_under_load_quick", ("time_limits_under_load.py", "--quick", "--out",
                                          "benchmarks/results/time_limits_under_load_quick.md"),
         ("time_limits_under_load_quick.md",), True),
    Step("batch_sweep", ("batch_sweep.py",), ("batch_sweep.md",), True),
    Step("batch_sweep_auto", ("batch_sweep.py", "--method", "auto", "--time-limit", "1"),
         ("batch_sweep_auto.md",), True),
    Step("service_throughput", ("service_throughput.py",), ("service_throughput.md",), True),
    Step("development_quick", ("heldout.py", "--per-set", "6", "--out", "benchmarks/results/development_quick.md"),
         ("development_quick.md",), True),
    Step("unit_costs", ("unit_costs.py",), ("unit_costs.md",), False),
    Step("placements", ("placements.py", "--time-limit", "30"), ("placements.md",), False),
    Step("zb_paper", ("zb_paper.py",), ("zb_paper.md",), False),
    Step("zb_references", ("zb_reference_table.py", "--paper"), ("zb_references.md",), False),
    Step("zb_references_heldout", ("zb_reference_table.py", "--heldout"), ("zb_references_heldout.md",), False),
    Step("heldout", ("heldout.py", "--set", "heldout"), ("heldout.md",), False),
    Step("development", ("heldout.py",), ("development.md",), False),
    Step("tune_zb_policies", ("tune_zb_policies.py",), ("tune_zb_policies.md",), False),
    Step("tune_list_policies_v-greedy", ("tune_list_policies.py", "--set", "v-greedy"), ("tune_list_policies_v-greedy.md",), False),
    Step("tune_list_policies_v-memory", ("tune_list_policies.py", "--set", "v-memory"), ("tune_list_policies_v-memory.md",), False),
    Step("tune_list_policies_v-wide", ("tune_list_policies.py", "--set", "v-wide"), ("tune_list_policies_v-wide.md",), False),
    Step("tune_list_policies_interleaved", ("tune_list_policies.py", "--set", "interleaved"), ("tune_list_policies_interleaved.md",), False),
    Step("compare_list_policies", ("compare_list_policies.py",), ("compare_list_policies.md",), False),
    Step("cpsat_dtime_zb", ("cpsat_dtime.py", "--only", "zb", "--time-limit", "60", "--out",
                            "benchmarks/results/cpsat_dtime_zb.md"), ("cpsat_dtime_zb.md",), False),
    Step("determinism", ("determinism.py",), ("determinism.md",), False),
    Step("ilp_vs_cpsat", ("ilp_vs_cpsat.py", "--seed", "11", "--cases", "30", "--time-limit", "10"),
         ("ilp_vs_cpsat.md",), False),
    Step("ilp_backends", ("ilp_backends.py", "--time-limit", "20"), ("ilp_backends.md",), False),
    Step("runtime", ("runtime_vs_torch.py", "--rounds", "40"), ("runtime.md",), False),
    Step("anchors", ("anchors.py", "--full"), ("anchors.md",), False),
    Step("anchors_large_ops", ("anchors.py", "--full", "--only", "large,development", "--min-ops", "4001", "--out",
                               "benchmarks/results/anchors_large_ops.md"), ("anchors_large_ops.md",), False),
    Step("limit_use_large", ("limit_use.py", "--large", "--rates"), ("limit_use_large.md",), False),
    Step("phase_trace", ("phase_trace.py",), ("phase_trace.md",), False),
    Step("large_problems", ("large_problems.py",), ("large_problems.md",), False),
    Step("time_limits_under_load", ("time_limits_under_load.py",), ("time_limits_under_load.md",), False),
    Step("cpsat_setup", ("cpsat_setup.py",), ("cpsat_setup.md",), False),
    Step("anchors_60s", ("anchors.py", "--quick", "--only", "v,interleaved", "--time-limits", "10,60", "--out",
                         "benchmarks/results/anchors_60s.md"), ("anchors_60s.md",), False),
    Step("anchors_interleaved_60s", ("anchors.py", "--quick", "--only", "interleaved", "--time-limits", "10,60", "--out",
                                     "benchmarks/results/anchors_interleaved_60s.md"), ("anchors_interleaved_60s.md",), False),
    Step("v_placement", ("v_placement.py",), ("v_placement.md",), False),
    Step("v_placement_60s", ("v_placement.py", "--full", "--p", "4", "8", "--profiles", "1.5B", "6.2B", "--out",
                             "benchmarks/results/v_placement_60s.md"), ("v_placement_60s.md",), False),
    Step("dualpipe", ("dualpipe.py",), ("dualpipe.md",), False),
    Step("dualpipe_exact", ("dualpipe_exact.py",), ("dualpipe_exact.md",), False),
    Step("dualpipe_exact_60s", ("dualpipe_exact.py", "--time-limit", "60", "--max-ops", "96", "--no-auto", "--out",
                                "benchmarks/results/dualpipe_exact_60s.md"), ("dualpipe_exact_60s.md",), False),
    Step("plan", ("plan.py", "--time-limit", "10"), ("plan.md",), False),
    Step("step", ("step.py", "--time-limit", "10"), ("step.md",), False),
    Step("phase_costs", ("phase_costs.py",), ("phase_costs.md",), True),
    Step("plan_60s", ("plan.py", "--time-limit", "60", "-o", "benchmarks/results/plan_60s.md"), ("plan_60s.md",), False),
    Step("batch_stop", ("batch_stop.py", "--trials", "2"), ("batch_stop.md",), False),
    Step("scale_out", ("scale_out.py",), ("scale_out.md",), False),
    Step("reliability", ("reliability.py",), ("reliability.md",), False),
    Step("fidelity", ("fidelity.py",), ("fidelity.md",), False),
    Step("host_memory", ("host_memory.py",), ("host_memory.md",), False),
    Step("v_placement_relax", ("v_placement_relax.py",), ("v_placement_relax.md",), False),
    Step("scale_out_hits", ("scale_out.py", "--only", "hits"), ("scale_out_hits.md",), False),
    Step("scale_out_ray", ("scale_out.py", "--only", "ray"), ("scale_out_ray.md",), False),
    Step("scale_out_hits_ray", ("scale_out.py", "--only", "hits,ray"), ("scale_out_hits_ray.md",), False),
)

#: Results files the docs link to that no step rewrites, on purpose: records of a run at an earlier
#: commit or under a condition a re-run would not reproduce, kept so the figures quoted from them
#: stay checkable (tests/test_run_all_covers_results.py). Each says why.
SNAPSHOTS: dict[str, str] = {
    "fidelity_b4f06b7.md": "the fidelity run at commit b4f06b7 on an idle machine, before the twin-sum term",
    "fidelity_loaded.md": "the fidelity run made under load on purpose (load 4.6-6.9), to check CPU-time compute",
    "scale_out_b4f06b7.md": "the scale-out run at commit b4f06b7, before --nice idle, the long slice and Ray chunks",
    "scale_out_hits_0be1339.md": "the cache-hit run at commit 0be1339 under load (3.4-5.2), quoted beside the idle ones",
    "fidelity_740e914.md": "the fidelity run at commit 740e914 (load 1.8-4.0) that the DualPipe diagnosis quotes",
    "fidelity_7d38bc9.md": "the fidelity run at commit 7d38bc9 under load (8.5-8.7) whose contention calibration caught a burst",
    "scale_out_hits_eedf5ab.md": "the idle-machine cache-hit run at commit eedf5ab, before the idle cgroup (the tail it fixed)",
    "fidelity_2dcbca2.md": "the idle fidelity run at commit 2dcbca2, whose p = 4 rows used the uniform contention factor",
    "fidelity_c4ee85c.md": "the idle fidelity run at commit c4ee85c, whose p = 4 main column was the order re-timed on 2 cores",
    "fidelity_drift.md": "an idle fidelity run whose layer profile ran about 40% slower than the stage profile a minute later",
    "fidelity_992102d.md": "the idle fidelity run at commit 992102d, the last whose main column was the uniform factor",
    "fidelity_c0403e3_3.md": "the third of three idle fidelity runs back to back at c0403e3 (AMD), its layer profile slow",
    "host_memory_9dd7e77.md": "the allocator comparison at 9dd7e77 (Intel) where the kept heap made every step shorter",
    "scale_out_eedf5ab.md": "the idle scale-out run at eedf5ab that docs/scale-out.md's table before the idle cgroup quotes",
    "scale_out_hits_abbe17d.md": "the idle cache-hit run at abbe17d, solves in the idle cgroup, p99 0.83x of paused",
    "plan_485269a.md": "the 10 s planning run of the nine dense cases that docs/planning.md describes case by case",
    "plan_60s_42880b5.md": "the 60 s planning run at 42880b5 whose table docs/planning.md quotes",
    "v_placement_9dd7e77.md": "the V placement run at 9dd7e77, with the wide grid, that docs/v-placement.md compares",
    "anchors_60s_9dd7e77.md": "the 60 s anchors at 9dd7e77, where the interleaved 3% target held on all cases",
    "anchors_interleaved_60s_184910b.md": "the other interleaved sizes at 60 s, at 184910b, that the anchors record quotes",
    "fidelity_aaecb27.md": "a second idle fidelity run with the slowdown curve, at commit aaecb27, minutes after the first",
    "fidelity_42880b5.md": "the idle fidelity run at commit 42880b5 (AMD VM), the last before freed host memory was kept",
    "fidelity_ed5faf2.md": "the first idle fidelity run with the slowdown curve (commit ed5faf2, Intel VM), before the curve's k / cores floor",
    "fidelity_9dd7e77.md": "the idle fidelity run at commit 9dd7e77 (Intel VM), the first with freed host memory kept",
    "fidelity_c0403e3_1.md": "the first of three idle fidelity runs at commit c0403e3 (AMD VM), whose p = 2 curve caught a burst",
    "fidelity_c0403e3_2.md": "the second of three idle fidelity runs at commit c0403e3 (AMD VM); fidelity_c0403e3_3.md holds the third",
}


#: Linked results files whose re-run waits on a change in progress: the solver refactor keeps
#: deterministic answers but moves timing, so the long runs and every wall-clock figure are made once,
#: after it, on a quiet machine (``python benchmarks/run_all.py --stale``). tests/test_results_current.py fails on a stale file not
#: listed here and on a listed file that is current again, so this only shrinks.
RERUN_PENDING: dict[str, str] = {}


def linked_results() -> dict[str, list[str]]:
    """Results file name -> the pages (README.md, docs/**/*.md: design records too) that link it."""
    out: dict[str, list[str]] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for name in re.findall(r"benchmarks/results/([\w\-]+\.md)", page.read_text()):
            if page.name not in out.setdefault(name, []):
                out[name].append(page.name)
    return out


def code_commits_since(sha: str) -> int | None:
    """Commits touching ``CODE_PATHS`` reachable from HEAD and not from ``sha`` (None: unknown commit)."""
    result = subprocess.run(["git", "rev-list", "--count", f"{sha}..HEAD", "--", *CODE_PATHS], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    return int(result.stdout) if result.returncode == 0 else None


def stale_reasons(name: str, readme_linked: bool) -> list[str]:
    """Why a linked results file needs its step re-run (empty: it is current)."""
    path = RESULTS / name
    if not path.is_file():
        return ["missing"]
    header = read_header(path.read_text())
    reasons = [] if header else ["no 'commit: <sha>' first line"]
    if not path.with_suffix(".json").is_file():
        reasons.append("no JSON beside it")
    if readme_linked and header:
        sha = header["commit"].split()[0]
        count = code_commits_since(sha)
        if count is None:
            reasons.append(f"commit {sha} is not in this repository")
        elif count > MAX_CODE_COMMITS:
            reasons.append(f"{count} commits touching {', '.join(CODE_PATHS)} since {sha} (at most {MAX_CODE_COMMITS})")
    if readme_linked:
        lacking = (f"{Path(name).stem}.json has no figures field", f"benchmarks/results/{name} has no JSON")
        fields = {f.field for f in readme_figures.figures(readme_figures.README.read_text())
                  if f.field and any(x in (readme_figures.problem(f) or "") for x in lacking)}
        if fields:
            reasons.append(f"its JSON lacks the README's fields {', '.join(sorted(fields))}")
    return reasons


def stale() -> dict[str, list[str]]:
    """Every linked results file that is not current, with its reasons (snapshots: header only)."""
    out = {}
    for name, pages in linked_results().items():
        reasons = stale_reasons(name, "README.md" in pages and name not in SNAPSHOTS)
        if reasons:
            out[name] = reasons
    return out


def plan(full: bool, only: str, stale_only: bool = False) -> list[Step]:
    """The steps of a mode, in order; ``only`` (comma-separated names) narrows them; ``stale_only``:
    the steps that rewrite a results file :func:`stale` names."""
    if stale_only:
        names = set(stale())
        return [s for s in STEPS if names & set(s.results)]
    steps = [s for s in STEPS if full or s.quick]
    if only:
        wanted = set(only.split(","))
        unknown = wanted - {s.name for s in STEPS}
        if unknown:
            raise ValueError(f"--only: unknown step(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(s.name for s in STEPS)}")
        steps = [s for s in STEPS if s.name in wanted]
    return steps


def run(step: Step) -> tuple[int, float]:
    """Run one step from the repository root; (exit code, wall seconds). Its output streams through."""
    print(f"\n=== {step.name}: {step.command}", flush=True)
    t0 = time.perf_counter()
    try:
        code = subprocess.run([sys.executable, f"benchmarks/{step.args[0]}", *step.args[1:]], cwd=ROOT,
                              timeout=STEP_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        code = -1
    return code, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true", help="the steps that take about a minute or less")
    mode.add_argument("--full", action="store_true", help="every step")
    mode.add_argument("--stale", action="store_true", help="the steps whose linked results files are not current")
    ap.add_argument("--only", default="", help="comma-separated step names (see --list)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    args = ap.parse_args(argv)
    try:
        steps = plan(args.full, args.only, args.stale)
    except ValueError as e:
        ap.error(str(e))
    if args.list:
        why = stale() if args.stale else {}
        for s in steps:
            print(f"{s.name:20} {'quick' if s.quick else 'full ':5}  {s.command}  ->  "
                  + ", ".join(f"benchmarks/results/{r}" for r in s.results))
            for r in s.results:
                if r in why:
                    print(f"{'':28}{r}: {'; '.join(why[r])}")
        return 0

    rows = []
    for step in steps:
        code, seconds = run(step)
        rows.append(f"| {step.name} | `{step.command}` | {', '.join(step.results)} | "
                    f"{'ok' if code == 0 else f'FAILED (exit {code})'} | {seconds:.0f} |")
    check = subprocess.run([sys.executable, "-m", "pytest", "-q", "tests/test_readme_figures.py",
                            "tests/test_results_current.py"], cwd=ROOT)
    verdict = ("every README figure matches its results file" if check.returncode == 0 else
               "some README figures no longer match their results files: see the output of "
               "`python benchmarks/readme_figures.py` (`--write` copies the fields into the README) and "
               "`python -m pytest -q tests/test_readme_figures.py tests/test_results_current.py`")
    text = "\n".join([
        "# Regenerating the README's figures",
        "",
        f"Made by `python benchmarks/run_all.py {' '.join(argv if argv is not None else sys.argv[1:])}`. "
        f"Afterwards: {verdict}.",
        "",
        "| step | command | results | outcome | wall s |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ])
    publish(text, ROOT / "benchmarks" / "results" / "run_all.md")
    failed = any("FAILED" in r for r in rows)
    return 1 if failed or check.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
