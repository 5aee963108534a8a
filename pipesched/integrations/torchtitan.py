"""A torchtitan job on a pipesched plan: the values its config needs, made once and shared by every rank.

- :func:`startup` — at start-up, from the job's own config (model args, batch sizes) and parallel dims:
  rank 0 builds the model's costs (:mod:`pipesched.solver.costmodel`), asks the service for a plan
  through the :class:`~pipesched.client.Client` (``fallback="local"``: planned on rank 0 when the service
  is unreachable) and broadcasts it; every other rank waits on that broadcast, never on the service,
  so a job of thousands of ranks sends one request. Each rank then writes the schedule CSV and sets
  the pipeline fields of the config. Call it after ``init_process_group`` and before building the
  trainer (torchtitan keeps a process group that already exists).
- :func:`plan_pipeline` — the same from a pipesched Model and Cluster.
- :func:`configure` — a plan file to a config (what the module ``pipesched export --format torchtitan
  -o DIR`` writes calls).

The values follow :mod:`pipesched.solver.formats.torchtitan` (torchtitan 0.3.0). Importing this module
imports neither torch nor torchtitan: the config is set through its attributes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipesched.solver.core.io import write_atomic
from pipesched.solver.costmodel.hardware import DEVICES
from pipesched.solver.costmodel.transformer import (
    TransformerConfig,
    default_cluster,
    transformer_model,
)
from pipesched.solver.formats.torchtitan import TorchtitanJob, torchtitan_job
from pipesched.solver.planning import Cluster, Model, Plan
from pipesched.solver.planning.exports import TORCHTITAN_VERSION

#: The config fields a job sets, dotted from the config's root (the order of :meth:`TorchtitanJob.flags`).
FIELDS = ("parallelism.pipeline_parallel_degree", "parallelism.pipeline_parallel_schedule",
          "parallelism.pipeline_parallel_schedule_csv", "parallelism.module_fqns_per_model_part",
          "parallelism.pipeline_parallel_microbatch_size", "training.local_batch_size", "training.seq_len",
          "training.disable_cuda_graphs", "activation_checkpoint")


class StartupError(RuntimeError):
    """No plan for this job: rank 0's reason, raised on every rank."""


@dataclass(frozen=True)
class PipelineJob:
    """A plan and the torchtitan values it fixes; the CSV is at ``csv_path`` on this rank."""

    plan: Plan
    job: TorchtitanJob
    csv_path: Path

    def values(self) -> dict[str, Any]:
        """``{dotted field: value}`` for the fields of :data:`FIELDS` (``seq_len`` only when recorded;
        ``activation_checkpoint`` None: off, as the plan assumes)."""
        j = self.job
        out: dict[str, Any] = dict(zip(FIELDS, (
            j.degree, j.schedule_class, str(self.csv_path), [list(x) for x in j.module_fqns], j.microbatch_size,
            j.local_batch_size, j.sequence_length, True, None), strict=True))
        if j.sequence_length is None:
            del out["training.seq_len"]
        return out

    def flags(self) -> list[str]:
        """The same values as torchtitan command-line flags."""
        return self.job.flags(str(self.csv_path))

    def apply(self, config: Any) -> Any:
        """Set the values on a torchtitan ``Trainer.Config`` (in place; returned for chaining)."""
        for dotted, value in self.values().items():
            *path, name = dotted.split(".")
            part = config
            for step in path:
                part = getattr(part, step, None)
            if part is None or not hasattr(part, name):
                raise StartupError(f"the torchtitan config has no {dotted}: these values are for torchtitan "
                                   f"{TORCHTITAN_VERSION}'s config")
            setattr(part, name, value)
        return config


def job_of(plan: Plan, csv_path: str | Path) -> PipelineJob:
    """The plan's torchtitan values, with its CSV written to ``csv_path`` (whole: ranks sharing a
    filesystem may write the same file at once)."""
    job = torchtitan_job(plan)
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(csv_path, job.csv)
    return PipelineJob(plan, job, Path(csv_path).resolve())


def configure(config: Any, plan_path: str | Path, csv_path: str | Path) -> Any:
    """``config`` with the pipeline of the plan in ``plan_path`` (its CSV written to ``csv_path``)."""
    plan = Plan.model_validate_json(Path(plan_path).read_text())
    return job_of(plan, csv_path).apply(config)


# ------------------------------------------------------------------ from the job's own description
def transformer_config(model_args: Any, *, seq_len: int, microbatch_size: int, tp: int = 1, dp: int = 1,
                       zero: int = 0) -> TransformerConfig:
    """The cost model's config of a torchtitan Llama-style model config (0.3.0: ``dim``, ``vocab_size``,
    ``layers[i].attention.n_heads`` / ``n_kv_heads``, ``layers[i].feed_forward.w1.out_features``)."""
    try:
        block = model_args.layers[0]
        heads = block.attention.n_heads
        return TransformerConfig(hidden=model_args.dim, layers=len(model_args.layers), heads=heads,
                                 kv_heads=block.attention.n_kv_heads or heads,
                                 ffn=block.feed_forward.w1.out_features, vocab=model_args.vocab_size, seq=seq_len,
                                 microbatch_size=microbatch_size, tp=tp, zero=zero, dp=dp)
    except (AttributeError, IndexError, TypeError) as e:
        raise StartupError(f"cannot read the model's shape from {type(model_args).__name__} ({e}): pass a "
                           "pipesched Model to plan_pipeline instead") from None


def startup(config: Any, parallel_dims: Any, csv_path: str | Path, *, url: str | None, device: str = "h100",
            stages_per_device: int = 1, placement: Literal["loop", "v"] = "loop", method: str = "auto",
            time_limit_s: float = 30.0, client: Any = None, group: Any = None) -> PipelineJob:
    """Plan a torchtitan job from its ``Trainer.Config`` and ``ParallelDims`` (``pp``, ``tp``,
    ``dp_shard``, ``dp_replicate``) on the ``device`` cost model, set the plan's values on ``config``
    and return them. Every rank of ``group`` (default: the world) calls it; see :func:`plan_pipeline`."""
    if device not in DEVICES:
        raise StartupError(f"device must be one of {sorted(DEVICES)} (got {device!r})")
    training, parallelism = config.training, config.parallelism
    mbs = parallelism.pipeline_parallel_microbatch_size
    if training.local_batch_size % mbs:
        raise StartupError(f"training.local_batch_size ({training.local_batch_size}) must be a multiple of "
                           f"parallelism.pipeline_parallel_microbatch_size ({mbs})")
    dp = parallel_dims.dp_shard * parallel_dims.dp_replicate
    shape = transformer_config(config.model_spec.model, seq_len=training.seq_len, microbatch_size=mbs,
                               tp=parallel_dims.tp, dp=dp, zero=3 if parallel_dims.dp_shard > 1 else 0)
    spec = DEVICES[device]
    cluster = default_cluster(shape, spec, devices=parallel_dims.pp, microbatches=training.local_batch_size // mbs,
                              stages_per_device=2 if placement == "v" else stages_per_device, placement=placement)
    job = plan_pipeline(transformer_model(shape, spec), cluster, csv_path, url=url, client=client, method=method,
                        time_limit_s=time_limit_s, group=group)
    job.apply(config)
    return job


def plan_pipeline(model: Model, cluster: Cluster, csv_path: str | Path, *, url: str | None = None,
                  client: Any = None, method: str = "auto", time_limit_s: float = 30.0,
                  module_names: str | None = None, group: Any = None) -> PipelineJob:
    """The plan of ``model`` on ``cluster`` on every rank of ``group`` (default: the world).

    Group rank 0 asks ``client`` (default ``Client(url, fallback="local")``; with ``url=None`` it plans
    locally) and broadcasts the plan, or the reason there is none, which every rank then raises as
    :class:`StartupError`; the others wait on the broadcast, so the process group's timeout must cover
    the plan's ``time_limit_s``. Each rank writes the CSV to ``csv_path``.
    """
    import torch.distributed as dist

    rank = dist.get_rank(group)
    box: list[Any] = [None]
    if rank == 0:
        try:
            found = _ask(model, cluster, url, client, method, time_limit_s, module_names)
            for warning in torchtitan_job(found).warnings:  # checked here: all ranks fail alike if not exportable
                warnings.warn(f"pipesched: {warning}", RuntimeWarning, stacklevel=2)
            box = [{"plan": found.model_dump_json()}]
        except Exception as e:  # every rank must learn it, or the others would wait on the broadcast forever
            box = [{"error": f"{type(e).__name__}: {e}"}]
    src = 0 if group is None else dist.get_global_rank(group, 0)
    dist.broadcast_object_list(box, src=src, group=group)
    if "error" in box[0]:
        raise StartupError(f"rank {rank}: no pipeline plan (rank 0: {box[0]['error']})")
    return job_of(Plan.model_validate_json(box[0]["plan"]), csv_path)


def _ask(model: Model, cluster: Cluster, url: str | None, client: Any, method: str, time_limit_s: float,
         module_names: str | None) -> Plan:
    if client is None and url is None:
        from pipesched.solver.isolated import call_isolated
        from pipesched.solver.planning import plan
        from pipesched.solver.planning.cli import parse_module_names

        names = parse_module_names(module_names) if module_names else None
        return call_isolated(plan, model, cluster, method, time_limit_s, names=names)
    if client is None:
        from pipesched.client import Client

        with Client(url, fallback="local") as own:  # type: ignore[arg-type]
            return own.plan(model, cluster, method, time_limit_s, module_names=module_names)
    return client.plan(model, cluster, method, time_limit_s, module_names=module_names)
