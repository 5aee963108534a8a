"""pipesched batch: parallel, resumable, and one bad problem does not stop the sweep."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from api_servers import Server

from pipesched.cli import main
from pipesched.solver import Schedule, validate


def write_sweep(folder: Path) -> Path:
    folder.mkdir()
    for p, m in ((2, 3), (2, 4), (3, 4)):
        (folder / f"p{p}m{m}.json").write_text(json.dumps({"devices": p, "microbatches": m}))
    (folder / "broken.json").write_text(json.dumps({"devices": 2, "microbatches": 3, "costs": {"forward": [1.0]}}))
    return folder


def test_batch_solves_reports_the_bad_problem_and_resumes(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    sweep, out = write_sweep(tmp_path / "sweep"), tmp_path / "out"
    assert main(["batch", str(sweep), "-o", str(out), "--jobs", "2", "--method", "gpipe", "--time-limit", "5"]) == 1
    err = capsys.readouterr().err
    assert "broken" in err and "costs.forward has 1 entries" in err
    solved = sorted(p.name for p in out.glob("p*.json"))
    assert solved == ["p2m3.json", "p2m4.json", "p3m4.json"] and not (out / "broken.json").exists()
    assert all(validate(Schedule.model_validate_json((out / n).read_text())) == [] for n in solved)
    with open(out / "summary.csv") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert rows["broken"]["status"] == "error" and "costs.forward" in rows["broken"]["error"]
    assert rows["p3m4"]["status"] in ("feasible", "optimal") and float(rows["p3m4"]["makespan"]) > 0
    assert "| p2m3 |" in (out / "summary.md").read_text()

    before = {n: (out / n).stat().st_mtime_ns for n in solved}
    (out / "p2m4.json").unlink()
    main(["batch", str(sweep), "-o", str(out), "--jobs", "2", "--method", "gpipe", "--time-limit", "5"])
    assert "1 to solve, 2 already in" in capsys.readouterr().err
    assert (out / "p2m3.json").stat().st_mtime_ns == before["p2m3.json"]  # not solved again
    assert (out / "p2m4.json").exists()


def test_batch_reads_jsonl_and_solves_through_the_service(server: Server, tmp_path: Path) -> None:
    lines = tmp_path / "sweep.jsonl"
    lines.write_text(
        json.dumps({"name": "first", "problem": {"devices": 2, "microbatches": 2}}) + "\n"
        + "{not json}\n" + json.dumps({"devices": 2, "microbatches": 6}) + "\n"
    )
    out = tmp_path / "out"
    code = main(["batch", str(lines), "-o", str(out), "--jobs", "2", "--server", server.url, "--method", "gpipe"])
    assert code == 1  # the line that is not JSON
    assert sorted(p.name for p in out.glob("*.json")) == ["first.json", "sweep-00003.json"]
    summary = (out / "summary.md").read_text()
    assert "sweep-00002" in summary and "not valid JSON" in summary
