"""Planning a whole model: layer split, recomputation and schedule (issue 10)."""

from .model import Cluster, ExpandedLayer, Layer, LayerMemory, Link, Model, Recompute, Units

__all__ = ["Cluster", "ExpandedLayer", "Layer", "LayerMemory", "Link", "Model", "Recompute", "Units"]
