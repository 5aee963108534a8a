"""Plans run in the real torchtitan 0.3.0 as they are: on CPU gloo ranks, torchtitan's own config parser
reads the flags ``pipesched export --format torchtitan`` prints, its ``pipeline_llm`` splits its Llama3
debug model and applies its own ``parallelize_llama``, and torch's runtime runs pipesched's CSV; the
gradients equal the unsplit model's, for v = 1, loop v = 2 and V. The start-up helper does the same from
the job's own config: rank 0 asks a real service (or, when it is unreachable, plans locally) and the
other rank only receives the broadcast.

What is torchtitan's and not tested here: its ``train.py`` (it needs CUDA, and its trainer's
``step(arg_mbs=...)`` call is refused by torch 2.13); FlexAttention has no backward on CPU, so the debug
model's inner attention is swapped for SDPA as torchtitan's own graph_trainer tests do; its chunked loss
is replaced by plain cross-entropy; bf16 mixed precision is turned off so the comparison is exact.
One spawned group runs every case (each rank imports torchtitan once: seconds).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from pipesched.cli import main
from pipesched.runtime.check import TOLERANCE
from pipesched.runtime.launch import free_port, run_ranks
from pipesched.solver.costmodel.hardware import DEVICES
from pipesched.solver.costmodel.transformer import TransformerConfig, transformer_model
from pipesched.solver.planning import Cluster, plan
from pipesched.solver.planning.exports import TORCHTITAN_NAMES

if os.environ.get("PIPESCHED_REQUIRE_TORCH") == "1" and sys.version_info >= (3, 11):
    import torchtitan  # noqa: F401 - in the dev extra: CI fails rather than skips without it
else:
    pytest.importorskip("torchtitan", reason="torchtitan (dev extra, Python >= 3.11) is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from api_servers import Server  # noqa: E402 - a real service on loopback, as the API tests start it

#: torchtitan's Llama3 debug model as pipesched's cost model sees it; 2 sequences of 16 tokens per microbatch.
DEBUG_LLAMA = TransformerConfig(hidden=256, layers=6, heads=16, kv_heads=16, ffn=768, vocab=2048, seq=16,
                                microbatch_size=2)
EXPORTED = {"v1": {}, "loop-v2": {"stages_per_device": 2}, "v-shape": {"stages_per_device": 2, "placement": "v"}}
STARTUP = {"service": "loop", "local-fallback": "v"}
#: The job's own flags (not the plan's): the base of every case.
BASE = ["--module", "llama3", "--config", "llama3_debugmodel", "--training.mixed_precision_param", "float32"]


def _torchtitan_rank(rank: int, world: int, exported: dict[str, list[str]], module_dir: str,
                     startup: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
    """Every case on this rank: max |grad - unsplit grad| over the parameters this rank holds."""
    import torchtitan.distributed.parallel_dims as parallel_dims_module
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part

    from pipesched.integrations.torchtitan import startup as pipesched_startup

    parallel_dims_module.device_type = "cpu"  # torchtitan 0.3.0 takes "cuda" when it finds no accelerator
    dims = ParallelDims(dp_replicate=1, dp_shard=1, cp=1, tp=1, pp=world, ep=1, world_size=world)
    dims.build_mesh()
    out: dict[str, Any] = {"torchtitan_names": _generate_llm_fqn_per_model_part(1, 6)[0]}
    for name, flags in exported.items():
        out[name] = _train_once(ConfigManager().parse_args([*BASE, *flags]), dims)
    if rank == 0:  # the module `export -o` wrote, loaded the way torchtitan loads a job
        sys.path.insert(0, module_dir)
        job = ConfigManager().parse_args(["--module", "pipesched_job", "--config", "job",
                                          "--training.mixed_precision_param", "float32"])
        flagged = ConfigManager().parse_args([*BASE, *exported["v-shape"]])
        out["module_matches_flags"] = (job.parallelism == flagged.parallelism and job.training == flagged.training
                                       and job.activation_checkpoint is None)
    for name, (url, placement, cache) in startup.items():
        os.environ["PIPESCHED_CLIENT_CACHE"] = cache
        config = ConfigManager().parse_args([*BASE, "--training.seq_len", "16", "--training.local_batch_size", "8",
                                             "--parallelism.pipeline_parallel_microbatch_size", "2"])
        found = pipesched_startup(config, dims, Path(cache) / "schedule.csv", url=url, placement=placement,
                                  time_limit_s=0.5)
        out[name] = {"plan": found.plan.model_dump_json(), **_train_once(config, dims)}
    return out


def _train_once(config: Any, dims: Any) -> dict[str, Any]:
    """torchtitan's split of a fresh debug model by ``config``, one step of pipesched's CSV, the gradients
    against the unsplit model's summed over the same microbatches."""
    import torch
    from torchtitan.distributed.pipeline_parallel import pipeline_llm
    from torchtitan.models.common.attention import ScaledDotProductAttention
    from torchtitan.models.llama3 import model_registry

    spec = model_registry("debugmodel")
    for layer in spec.model.layers:  # FlexAttention has no CPU backward
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    with torch.device("meta"):
        model = spec.model.build()
    model.to_empty(device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        model.init_weights(buffer_device=None)
    whole = copy.deepcopy(model)

    def loss_fn(pred: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, dict]:
        return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten()), {}

    schedule, parts, first, last = pipeline_llm(
        model, parallel_dims=dims, training=config.training, parallelism=config.parallelism,
        compile_config=config.compile, ac_config=config.activation_checkpoint, dump_folder="/tmp",
        device=torch.device("cpu"), model_config=spec.model, parallelize_fn=spec.parallelize_fn, loss_fn=loss_fn)
    batch, seq = config.training.local_batch_size, config.training.seq_len
    g = torch.Generator().manual_seed(1)
    tokens, labels = (torch.randint(0, 2048, (batch, seq), generator=g) for _ in range(2))
    schedule.step(*((tokens,) if first else ()), **({"target": labels} if last else {}))
    mbs = config.parallelism.pipeline_parallel_microbatch_size
    total = sum(loss_fn(whole(tokens[i:i + mbs]), labels[i:i + mbs])[0] for i in range(0, batch, mbs))
    total.backward()
    reference = dict(whole.named_parameters())
    diffs = [float(((p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad) - reference[k].grad)
                   .abs().max()) for part in parts for k, p in part.named_parameters()]
    return {"max_diff": max(diffs), "params": len(diffs)}


def _plan_requests(server: Server) -> float:
    lines = server.get("/metrics").text.splitlines()
    return sum(float(x.rsplit(" ", 1)[1]) for x in lines
               if x.startswith("pipesched_http_requests_total{") and '"/v1/plan"' in x and 'method="POST"' in x)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], list[dict[str, Any]], float]:
    tmp = tmp_path_factory.mktemp("torchtitan")
    model = transformer_model(DEBUG_LLAMA, DEVICES["h100"])
    exported: dict[str, list[str]] = {}
    for name, extra in EXPORTED.items():
        path = tmp / f"{name}.json"
        path.write_text(plan(model, Cluster(devices=2, microbatches=4, **extra), "auto", 0.5).model_dump_json())
        args = ["export", str(path), "--format", "torchtitan"]
        if name == "v-shape":
            args += ["-o", str(tmp / "job")]
        stdout = tmp / f"{name}.flags"
        with open(stdout, "w") as f, contextlib.redirect_stdout(f):
            assert main(args) == 0
        exported[name] = shlex.split(stdout.read_text())
    server = Server(f"sqlite:///{tmp / 'cache.db'}", log=tmp / "server.log").start()
    try:
        startup = {"service": (server.url, STARTUP["service"], str(tmp / "cache-a")),
                   "local-fallback": (f"http://127.0.0.1:{free_port()}", STARTUP["local-fallback"], str(tmp / "cache-b"))}
        results = [r.value for r in run_ranks(_torchtitan_rank, 2, exported, str(tmp / "job"), startup,
                                              timeout_s=140)]
        requests = _plan_requests(server)
    finally:
        server.stop()
    return exported, results, requests


def test_the_default_names_are_torchtitans_own(ran) -> None:  # noqa: ANN001
    _, results, _ = ran
    titan = results[0]["torchtitan_names"]
    mine = TORCHTITAN_NAMES.split(";")
    assert titan == [mine[0], *(mine[1].format(i=i) for i in range(6)), *mine[2].split(",")]


@pytest.mark.parametrize("case", sorted(EXPORTED))
def test_the_exported_flags_train_in_torchtitan_with_the_unsplit_gradients(ran, case: str) -> None:  # noqa: ANN001
    exported, results, _ = ran
    assert "--parallelism.pipeline_parallel_schedule_csv" in exported[case]
    for r in results:
        assert r[case]["max_diff"] <= TOLERANCE, (case, r[case])
    assert sum(r[case]["params"] for r in results) == 3 + 6 * 7  # every parameter on exactly one rank


def test_the_written_config_module_is_the_flags(ran) -> None:  # noqa: ANN001
    _, results, _ = ran
    assert results[0]["module_matches_flags"] is True


@pytest.mark.parametrize("case", sorted(STARTUP))
def test_the_startup_helper_plans_once_and_every_rank_trains_on_the_same_plan(ran, case: str) -> None:  # noqa: ANN001
    _, results, requests = ran
    assert results[0][case]["plan"] == results[1][case]["plan"]  # rank 1 took rank 0's broadcast
    for r in results:
        assert r[case]["max_diff"] <= TOLERANCE, (case, r[case])
    assert f'"placement":"{STARTUP[case]}"' in results[0][case]["plan"]
    assert requests == 1  # the service heard rank 0 once; rank 1 asked no one, the fallback case no server
