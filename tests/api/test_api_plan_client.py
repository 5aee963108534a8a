"""``Client.plan`` and plan requests in ``pipesched batch``, against a real server and locally."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest
from api_servers import Server, free_port
from test_api_plan import EXAMPLE, TINY_CLUSTER, TINY_MODEL

from pipesched.cli import main
from pipesched.client import Client, ServiceError, ServiceUnavailable
from pipesched.solver import validate
from pipesched.solver.planning import Plan
from pipesched.solver.planning.exports import bounds_from_layout


def test_the_client_plans_the_readme_example_and_a_restart_reads_its_local_cache(make_server, tmp_path: Path) -> None:  # noqa: ANN001
    server = make_server().start()
    with Client(server.url, cache_dir=tmp_path / "cache") as client:
        first = client.plan(EXAMPLE["model"], EXAMPLE["cluster"], time_limit_s=3)
    assert isinstance(first, Plan) and first.schedule is not None and validate(first.schedule) == []
    assert bounds_from_layout(first.exports.megatron_layout, first.model.expanded()) == \
        [0, *(st.layers[1] for st in first.stages)]
    server.stop()
    with Client(server.url, cache_dir=tmp_path / "cache", retries=1) as restarted, warnings.catch_warnings():
        warnings.simplefilter("error")  # answered from the cache: no fallback warning
        assert restarted.plan(EXAMPLE["model"], EXAMPLE["cluster"], time_limit_s=3) == first
        with pytest.raises(ServiceUnavailable):  # a larger budget than cached does ask the service
            restarted.plan(EXAMPLE["model"], EXAMPLE["cluster"], time_limit_s=30)


def test_an_unreachable_service_falls_back_to_a_local_plan_with_a_warning(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, fallback="local", cache_dir=tmp_path, retries=2, backoff_s=0.01) as client, \
            pytest.warns(RuntimeWarning, match="unreachable; planning with 'greedy' on this machine"):
        found = client.plan(TINY_MODEL, TINY_CLUSTER, method="greedy", time_limit_s=1)
    assert found.schedule is not None and validate(found.schedule) == [] and found.exports.torch_csv
    with Client(url, cache_dir=False, retries=2, backoff_s=0.01) as strict, pytest.raises(ServiceUnavailable):
        strict.plan(TINY_MODEL, TINY_CLUSTER, method="greedy", time_limit_s=1)


def test_the_client_reports_a_refused_plan_naming_the_field(server: Server) -> None:
    with Client(server.url, cache_dir=False) as client, pytest.raises(ServiceError, match="method: unknown method"):
        client.plan(TINY_MODEL, TINY_CLUSTER, method="magic")


def test_batch_plans_model_cluster_items_beside_problems_and_resumes(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    sweep.mkdir()
    (sweep / "tiny.json").write_text(json.dumps({"model": TINY_MODEL, "cluster": TINY_CLUSTER}))
    (sweep / "p2m3.json").write_text(json.dumps({"devices": 2, "microbatches": 3}))
    (sweep / "nocluster.json").write_text(json.dumps({"model": TINY_MODEL}))
    (sweep / "flagged.json").write_text(json.dumps({"model": TINY_MODEL, "cluster": TINY_CLUSTER, "method": "auto"}))
    args = ["batch", str(sweep), "-o", str(out), "--jobs", "2", "--method", "greedy", "--time-limit", "1.5"]
    assert main(args) == 1  # the two bad items
    err = capsys.readouterr().err
    assert "nocluster" in err and "cluster: Field required" in err and "flagged: method" in err
    plan = Plan.model_validate_json((out / "tiny.json").read_text())
    assert plan.method == "greedy" and plan.schedule is not None and validate(plan.schedule) == []
    with open(out / "summary.csv") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert rows["tiny"]["method"] == "plan greedy" and float(rows["tiny"]["makespan"]) == pytest.approx(plan.step_time)
    assert rows["p2m3"]["status"] in ("optimal", "feasible")
    stamp = (out / "tiny.json").stat().st_mtime_ns
    main(args)
    assert "0 to solve, 2 already in" in capsys.readouterr().err
    assert (out / "tiny.json").stat().st_mtime_ns == stamp  # not planned again


def test_batch_sends_plan_lines_to_the_service(server: Server, tmp_path: Path) -> None:
    lines = tmp_path / "sweep.jsonl"
    lines.write_text(json.dumps({"name": "tiny", "model": TINY_MODEL, "cluster": {**TINY_CLUSTER, "microbatches": 3}})
                     + "\n")
    out = tmp_path / "out"
    assert main(["batch", str(lines), "-o", str(out), "--server", server.url, "--method", "greedy",
                 "--time-limit", "1.5"]) == 0
    plan = Plan.model_validate_json((out / "tiny.json").read_text())
    assert plan.microbatches == 3 and plan.schedule is not None and validate(plan.schedule) == []
