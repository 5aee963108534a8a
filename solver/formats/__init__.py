"""Converters at the edge: the SVG Gantt chart and torch.distributed.pipelining's CSV."""
