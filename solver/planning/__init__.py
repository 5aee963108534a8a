"""Planning a whole model: layer split, recomputation and schedule.

``plan(model, cluster, method, time_limit_s)`` returns a :class:`Plan`; :mod:`.induce` turns a split
into the Problem it runs as, :mod:`.split` holds the DPs and the hand rules, :mod:`.bound` the lower
bound over all splits, :mod:`.exports` the Megatron-LM and torchtitan forms of a split.
"""

from .candidates import candidate_splits
from .induce import InfeasibleSplit, Split, induce
from .model import (
    Cluster,
    DataParallel,
    ExpandedLayer,
    Layer,
    LayerComm,
    LayerMemory,
    Link,
    Model,
    Recompute,
    Units,
)
from .plan import Baseline, Exports, Plan, PlanStage
from .planner import plan

__all__ = ["Baseline", "Cluster", "DataParallel", "ExpandedLayer", "Exports", "InfeasibleSplit", "Layer", "LayerComm", "LayerMemory",
           "Link", "Model", "Plan", "PlanStage", "Recompute", "Split", "Units", "candidate_splits", "induce", "plan"]
