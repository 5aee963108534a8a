"""Split a stage's backward into B (input gradient) and W (weight gradient) without redoing work.

Zero-bubble pipelining (Qi et al., 2023) runs ``dL/dx`` (B) early, because the previous stage
waits on it, and ``dL/dW`` (W) later to fill bubbles. B and W share the chain of activation
gradients, so W must start from what B already computed rather than from the loss again.

How: in the stage's autograd graph, the *input path* ``P`` is every node from which a stage
input is reachable; B runs exactly those nodes (``autograd.grad`` w.r.t. the inputs, keeping the
graph). A parameter's gradient leaves ``P`` at *frontier* nodes (nodes of ``P``, or roots, with an
edge towards the parameter that avoids ``P``). B also asks for the gradient arriving at each
frontier node (``GradientEdge`` inputs of the same engine run), and W replays only the frontier nodes with those gradients, restricted to
the parameters (``autograd.backward(edges, grads, inputs=params)``), so the engine skips the input
path. Frontier nodes that share parameters are replayed together, each clamped to its recorded
gradient so nothing flowing between them is counted twice.

With no input needing a gradient (the first stage), ``P`` is empty: B has nothing to do and W is
the whole backward, as in torch's own ``_PipelineScheduleRuntime``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.autograd.graph import GradientEdge, Node, get_gradient_edge


def _edge(t: torch.Tensor) -> GradientEdge:
    return get_gradient_edge(t)


def _graph(roots: Sequence[Node]) -> dict[Node, list[Node]]:
    """Parents of every node reachable from ``roots`` (the reverse of ``next_functions``)."""
    parents: dict[Node, list[Node]] = {r: [] for r in roots}
    stack = list(roots)
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is None:
                continue
            if child not in parents:
                parents[child] = []
                stack.append(child)
            parents[child].append(node)
    return parents


def _ancestors(starts: Sequence[Node], parents: dict[Node, list[Node]]) -> set[Node]:
    """``starts`` and every node with a path to one of them."""
    seen = {s for s in starts if s in parents}
    stack = list(seen)
    while stack:
        for p in parents[stack.pop()]:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def _frontier(param: Node, parents: dict[Node, list[Node]], boundary: set[Node]) -> set[Node]:
    """Boundary nodes first met when walking from ``param`` towards the roots."""
    hit: set[Node] = set()
    seen = {param}
    stack = [param]
    while stack:
        for p in parents[stack.pop()]:
            if p in seen:
                continue
            seen.add(p)
            if p in boundary:
                hit.add(p)
            else:
                stack.append(p)
    return hit


@dataclass
class _Group:
    """Frontier nodes replayed together and the parameters they feed."""

    nodes: list[Node]
    params: list[torch.Tensor]
    grads: dict[Node, tuple[torch.Tensor | None, ...]] = field(default_factory=dict)


@dataclass
class WeightGrad:
    """What B leaves behind for W: frontier nodes (holding their saved tensors) and their gradients."""

    groups: list[_Group]

    def run(self) -> None:
        """Accumulate this microbatch's weight gradients into ``param.grad``; frees the graph."""
        for g in self.groups:
            edges, grads = [], []
            for node in g.nodes:
                for k, grad in enumerate(g.grads.get(node, ())):
                    if grad is not None:
                        edges.append(GradientEdge(node, k))
                        grads.append(grad)
            if not edges:
                continue
            handles = []
            if len(g.nodes) > 1:  # clamp: a frontier node receives exactly what B recorded for it
                for node in g.nodes:
                    recorded = g.grads.get(node)
                    if recorded is not None:
                        handles.append(node.register_prehook(lambda _grads, r=recorded: r))
            try:
                torch.autograd.backward(edges, grads, inputs=g.params)
            finally:
                for h in handles:
                    h.remove()
        self.groups = []


def _group_params(params: Sequence[torch.Tensor], parents: dict[Node, list[Node]], boundary: set[Node]) -> list[_Group]:
    """Each parameter with its frontier nodes; parameters whose frontiers share a node form one group."""
    group_of: dict[Node, int] = {}
    groups: list[_Group] = []
    for p in params:
        if not p.requires_grad:
            continue
        node = _edge(p).node
        if node not in parents:
            continue  # this microbatch's graph does not use p
        front = _frontier(node, parents, boundary)
        ids = sorted({group_of[n] for n in front if n in group_of})
        target = ids[0] if ids else len(groups)
        if not ids:
            groups.append(_Group(nodes=[], params=[]))
        merged = groups[target]
        for other in ids[1:]:
            for n in groups[other].nodes:
                group_of[n] = target
            merged.nodes += groups[other].nodes
            merged.params += groups[other].params
            groups[other] = _Group(nodes=[], params=[])
        for n in front:
            if n not in group_of:
                group_of[n] = target
                merged.nodes.append(n)
        merged.params.append(p)
    return [g for g in groups if g.params]


def backward_input(
    outputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor | None],
    inputs: Sequence[torch.Tensor],
    params: Sequence[torch.Tensor],
) -> tuple[list[torch.Tensor | None], WeightGrad]:
    """B: gradients of the stage ``inputs`` (``None`` where an input needs none) plus the W job.

    ``grad_outputs[j]`` is ``dL/d outputs[j]`` (``None`` for a scalar loss: ones).
    """
    outs = [(t, g if g is not None else torch.ones_like(t)) for t, g in zip(outputs, grad_outputs, strict=True)
            if t.requires_grad]
    root_edges = [_edge(t) for t, _ in outs]
    parents = _graph([e.node for e in root_edges])
    grad_inputs = [x for x in inputs if x.requires_grad]
    on_input_path = _ancestors([_edge(x).node for x in grad_inputs], parents)
    boundary = on_input_path | {e.node for e in root_edges}

    groups = _group_params(params, parents, boundary)

    # roots outside the input path: B never runs them, their gradients are the given ones
    recorded: dict[Node, tuple[torch.Tensor | None, ...]] = {}
    for e, (_, g) in zip(root_edges, outs, strict=True):
        if e.node not in on_input_path:
            prev = list(recorded.get(e.node, ()))
            prev += [None] * (e.output_nr + 1 - len(prev))
            prev[e.output_nr] = g if prev[e.output_nr] is None else prev[e.output_nr] + g
            recorded[e.node] = tuple(prev)

    # B: one engine run for the input gradients that also captures what arrives at each frontier
    # node (a GradientEdge input: the gradient of that node's k-th forward output)
    frontier = [n for g in groups for n in g.nodes if n in on_input_path]
    slots = [(n, k) for n in frontier for k in range(len(n._input_metadata))]
    if grad_inputs:
        got = torch.autograd.grad([t for t, _ in outs], [*grad_inputs, *(GradientEdge(n, k) for n, k in slots)],
                                  [g for _, g in outs], retain_graph=True, allow_unused=True)
    else:
        got = ()
    captured: dict[Node, list[torch.Tensor | None]] = {n: [None] * len(n._input_metadata) for n in frontier}
    for (n, k), grad in zip(slots, got[len(grad_inputs):], strict=True):
        captured[n][k] = grad
    recorded.update({n: tuple(v) for n, v in captured.items()})
    got = got[:len(grad_inputs)]
    by_id = {id(x): gx for x, gx in zip(grad_inputs, got, strict=True)}
    for g in groups:
        g.grads = {n: recorded[n] for n in g.nodes if n in recorded}
    return [by_id.get(id(x)) for x in inputs], WeightGrad(groups)


def backward_full(
    outputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor | None],
    inputs: Sequence[torch.Tensor],
) -> list[torch.Tensor | None]:
    """Fused backward: accumulate every parameter gradient and return the inputs' gradients."""
    outs = [(t, g) for t, g in zip(outputs, grad_outputs, strict=True) if t.requires_grad]
    torch.autograd.backward([t for t, _ in outs], [g for _, g in outs])
    return [x.grad if x.requires_grad else None for x in inputs]
