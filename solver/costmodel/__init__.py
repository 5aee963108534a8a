"""Cost models: where a :class:`~pipesched.solver.planning.Model`'s numbers come from when nothing
has been measured yet (issue 11). Pure Python; the measured route is ``pipesched.runtime.profiling.profile_layers``."""

from .hardware import DEVICES, LINKS, DeviceSpec, LinkSpec
from .transformer import TransformerConfig, default_cluster, transformer_model

__all__ = ["DEVICES", "LINKS", "DeviceSpec", "LinkSpec", "TransformerConfig", "default_cluster",
           "transformer_model"]
