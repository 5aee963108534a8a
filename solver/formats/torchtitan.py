"""A plan as a torchtitan job: the schedule CSV, the command-line flags that run it, a config module.

Written for torchtitan 0.3.0 (:data:`~pipesched.solver.planning.exports.TORCHTITAN_VERSION`), whose facts
this follows (read from its ``distributed/pipeline_parallel.py``, ``config/configs.py`` and ``trainer.py``):

- A job is a Python config function (``--module M --config F``) plus ``--section.field value`` flags;
  there is no TOML job file. A ``list[list[str]]`` flag takes one argument per stage, names comma-separated.
- With ``pipeline_parallel_schedule_csv`` set it runs torch's ``_PipelineScheduleRuntime`` on the CSV,
  but it still reads ``pipeline_parallel_schedule`` to decide which stages a rank builds: ranks r hold
  stages r and 2p-1-r for ``ZBVZeroBubble`` and ``DualPipeV``, stages r, r+p, ... for every other class.
  So the class must match the plan's placement, or the ranks build the wrong stages.
- Microbatches are ``local_batch_size // pipeline_parallel_microbatch_size``; they must be the plan's m.
- Pipeline parallelism needs ``--training.disable_cuda_graphs``.
- Activation checkpointing (its ``activation_checkpoint`` config, selective by default) covers every
  layer: there is no per-stage choice, so a plan's per-stage recompute cannot be expressed and is
  reported instead. The job turns it off (``activation_checkpoint:none``), as the plan's memory model
  assumes; torchtitan's selective checkpointing also refuses a split backward ("Trying to backward an
  extra time"), which runs a stage's graph twice (I, then W). The word is a tyro subcommand: it stays
  last, after any flag of the user's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.errors import NotApplicableError
from ..planning.exports import TORCHTITAN_VERSION
from ..planning.plan import Plan
from .torch_csv import to_torch_csv

#: Schedule classes whose stage placement matches each of pipesched's (torchtitan picks ranks from them).
SINGLE_STAGE, INTERLEAVED, V_SHAPE, V_DUALPIPE = "1F1B", "Interleaved1F1B", "ZBVZeroBubble", "DualPipeV"


@dataclass(frozen=True)
class TorchtitanJob:
    """The values of a torchtitan job's config that one plan fixes (see :meth:`flags`)."""

    degree: int
    schedule_class: str
    csv: str
    module_fqns: list[list[str]]
    microbatches: int
    microbatch_size: int
    sequence_length: int | None
    warnings: list[str] = field(default_factory=list)

    @property
    def local_batch_size(self) -> int:
        """``microbatches × microbatch_size``: with another value torchtitan splits into another count."""
        return self.microbatches * self.microbatch_size

    def flags(self, csv_path: str) -> list[str]:
        """torchtitan's command-line flags for this job, the CSV read from ``csv_path``."""
        out = ["--parallelism.pipeline_parallel_degree", str(self.degree),
               "--parallelism.pipeline_parallel_schedule", self.schedule_class,
               "--parallelism.pipeline_parallel_schedule_csv", csv_path,
               "--parallelism.module_fqns_per_model_part", *(",".join(names) for names in self.module_fqns),
               "--parallelism.pipeline_parallel_microbatch_size", str(self.microbatch_size),
               "--training.local_batch_size", str(self.local_batch_size)]
        if self.sequence_length is not None:
            out += ["--training.seq_len", str(self.sequence_length)]
        return [*out, "--training.disable_cuda_graphs", "activation_checkpoint:none"]


def schedule_class(plan: Plan) -> str:
    """The torchtitan schedule class whose stage placement is the plan's (NotApplicableError if none is)."""
    c = plan.cluster
    if c.placement == "v":
        method = plan.schedule.method if plan.schedule is not None else plan.method
        return V_DUALPIPE if method == "dualpipe-v" else V_SHAPE
    return SINGLE_STAGE if c.stages_per_device == 1 else INTERLEAVED


def torchtitan_job(plan: Plan) -> TorchtitanJob:
    """What a torchtitan job needs from ``plan``; raises NotApplicableError when torchtitan cannot run it."""
    if plan.schedule is None or plan.exports is None or plan.microbatches is None:
        raise NotApplicableError(f"the plan has status {plan.status!r} and no schedule to export"
                                 + (f" ({plan.reason})" if plan.reason else ""))
    if plan.schedule.problem.placement == "dual":
        raise NotApplicableError("placement 'dual' (DualPipe, two copies of the model) has no torchtitan schedule "
                                 "class: torchtitan's DualPipeV is DualPipe folded onto the V placement (plan with "
                                 "placement 'v' to export)")
    fqns = plan.exports.torchtitan_module_fqns
    warnings = []
    mbs = plan.model.microbatch_size
    if mbs is None:
        mbs = 1
        warnings.append("the plan's model records no microbatch_size: assuming 1 sequence per microbatch "
                        "(pipesched model transformer records it)")
    recomputed = [st.stage for st in plan.stages if st.recompute]
    if recomputed:
        warnings.append(f"the plan recomputes stage(s) {', '.join(map(str, recomputed))}, which torchtitan "
                        f"{TORCHTITAN_VERSION} cannot express (its activation checkpointing covers every layer): "
                        "the job turns checkpointing off, so they hold more activation memory than planned")
    return TorchtitanJob(degree=plan.cluster.devices, schedule_class=schedule_class(plan), csv=to_torch_csv(plan.schedule),
                         module_fqns=[list(x) for x in fqns], microbatches=plan.microbatches, microbatch_size=mbs,
                         sequence_length=plan.model.sequence_length, warnings=warnings)


#: The base job a written config module starts from when none is named.
DEFAULT_BASE = "torchtitan.models.llama3.config_registry:llama3_debugmodel"


def config_module(base: str = DEFAULT_BASE, plan_file: str = "plan.json", csv_file: str = "schedule.csv",
                  name: str = "pipesched_job") -> str:
    """The Python module ``name`` torchtitan loads with ``--module name --config job``: the ``base`` job
    (``MODULE:FUNCTION``) with the pipeline of the plan beside it."""
    module, _, function = base.partition(":")
    if not module or not function.isidentifier():
        raise NotApplicableError(f"--base must be MODULE:FUNCTION, a torchtitan config function (got {base!r})")
    return f'''"""torchtitan {TORCHTITAN_VERSION} job: {base} with the pipeline of the pipesched plan beside this file.

Written by `pipesched export --format torchtitan`. Run it with this folder on the Python path, e.g.
    PYTHONPATH=<this folder> torchrun --nproc-per-node <ranks> -m torchtitan.train --module {name} --config job
"""

from pathlib import Path

from pipesched.integrations.torchtitan import configure
from {module} import {function} as base  # the job the plan was made for

HERE = Path(__file__).resolve().parent


def job():
    """The base job with the plan's pipeline degree, schedule class and CSV, stages and batch sizes."""
    return configure(base(), HERE / {plan_file!r}, HERE / {csv_file!r})
'''
