"""Replaying a schedule on torch.distributed: the executor, its rank plans and transport, split backward,
recompute, the twin sum and the data-parallel sync, and torch's own runtime on an exported CSV."""
