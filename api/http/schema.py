"""The request schemas in the OpenAPI document state what the service accepts.

FastAPI derives the schemas from the wire models, which check most ranges in validators (one error
line naming the field) that JSON Schema cannot see, and the service's own caps come from its
settings. Here the document gains them: integer ranges and caps, the accepted magnitudes of every
number (0, or 1e-9 to 1e12), list lengths, the method names. Rules between fields (a per-stage list
has one entry per stage, a stage's memory deltas sum to 0, the op cap, placements, whether a method
applies) cannot be written in JSON Schema; each request schema's description states them.
"""

from __future__ import annotations

from typing import Any

from pipesched.solver.core.problem import MAX_MAGNITUDE, MIN_MAGNITUDE

from ..settings import Settings

SOLVE_RULES = (
    "Also checked, across fields (422 naming the field otherwise): each per-stage list has one entry per model "
    "stage (devices x stages_per_device; placement 'dual': devices), costs.comm as a list one per boundary between "
    "stages, costs.optimizer as a list one per device; memory.forward + backward_input + backward_weight = 0 for every stage; placement 'v' and 'dual' need "
    "stages_per_device = 2 ('dual' also an even devices, microbatches >= 2, and dual_split, 'dual' only, at most "
    "microbatches); devices x stages_per_device x microbatches x (3 with "
    "split_backward, else 2) <= {max_ops} (service_max_ops); a memory.limit list has one entry per device, and a 'Kx1f1b' limit needs memory.forward >= 0; the "
    "method applies to the problem (GET /v1/methods: e.g. 1f1b needs stages_per_device = 1).")
PLAN_RULES = (
    "Also checked, across fields (422 naming the field otherwise): each layer's memory (and recompute.memory) "
    "deltas sum to 0; a layer's comm.forward and comm.backward_input are at most its forward and backward_input; the figures of the layers one stage holds, summed, stay within 1e12, and so do the times derived from them (a stage's gradient sync over data_parallel, the optimizer step); layers expand (repeat) to at most 100000; placement 'v' needs stages_per_device = 2; a "
    "memory_per_device list has one entry per device; inter_node_link needs devices_per_node; devices x stages_per_device x the largest microbatch count "
    "x (3 with split_backward, else 2) <= {max_ops} (service_max_ops).")


def _magnitude(signed: bool) -> dict[str, Any]:
    """A number the service accepts: 0, or of magnitude 1e-9 to 1e12 (non-negative unless ``signed``)."""
    ranges: list[dict[str, Any]] = [{"type": "number", "enum": [0]},
                                    {"type": "number", "minimum": MIN_MAGNITUDE, "maximum": MAX_MAGNITUDE}]
    if signed:
        ranges.append({"type": "number", "minimum": -MAX_MAGNITUDE, "maximum": -MIN_MAGNITUDE})
    return {"anyOf": ranges}


def _per_stage(prop: dict[str, Any], signed: bool, max_items: int, number: dict[str, Any] | None = None) -> None:
    """``number | number[]`` (or null) with the accepted magnitudes (or ``number``) and list lengths."""
    out: list[dict[str, Any]] = []
    accepted = number or _magnitude(signed)
    for option in prop.pop("anyOf"):
        if option.get("type") == "number":
            out.append(accepted)
        elif option.get("type") == "array" and option.get("items", {}).get("type") == "number":
            out.append({"type": "array", "items": accepted, "minItems": 1, "maxItems": max_items})
        else:
            out.append(option)
    prop["anyOf"] = out


def _nullable_number(prop: dict[str, Any], **bounds: float) -> None:
    for option in prop["anyOf"]:
        if option.get("type") == "number":
            option.update(bounds)


def constrain(schemas: dict[str, Any], settings: Settings, method_names: list[str]) -> None:
    """Add the service's ranges and caps to the ``SolveRequest*`` and ``PlanRequest*`` component schemas."""
    stages = settings.service_max_devices * settings.service_max_stages_per_device
    problem = schemas["SolveRequest_Problem"]["properties"]
    problem["devices"].update(minimum=1, maximum=settings.service_max_devices)
    problem["microbatches"].update(minimum=1, maximum=settings.service_max_microbatches)
    problem["stages_per_device"].update(minimum=1, maximum=settings.service_max_stages_per_device)
    problem["dual_split"]["anyOf"][0].update(minimum=0, maximum=settings.service_max_microbatches)
    costs = schemas["SolveRequest_Costs"]["properties"]
    for name, prop in costs.items():
        share = {"type": "number", "minimum": MIN_MAGNITUDE, "maximum": 1} if name == "overlap_fb" else None
        _per_stage(prop, signed=False, max_items=stages, number=share)
    memory = schemas["SolveRequest_Memory"]["properties"]
    for name in ("forward", "backward_input", "backward_weight"):
        _per_stage(memory[name], signed=True, max_items=stages)
    _per_stage(memory["backward_input_transient"], signed=False, max_items=stages)
    _per_stage(memory["limit"], signed=False, max_items=settings.service_max_devices)
    for option in memory["limit"]["anyOf"]:
        if option.get("type") == "string":
            option["pattern"] = r"^(?=.*[1-9])[0-9]*\.?[0-9]+x1f1b$"  # a positive multiple
    for prop in schemas["SolveRequest_Units"]["properties"].values():  # a short printable name
        for option in prop["anyOf"]:
            if option.get("type") == "string":
                option["pattern"] = r"^[ -~]*[!-~][ -~]*$"
    for body, rules in (("SolveRequest", SOLVE_RULES), ("PlanRequest", PLAN_RULES)):
        request = schemas[body]
        request["description"] = rules.format(max_ops=settings.service_max_ops)
        request["properties"]["method"]["enum"] = method_names
        _nullable_number(request["properties"]["time_limit_s"], maximum=settings.max_time_limit_s)
        _nullable_number(request["properties"]["wait_s"], maximum=MAX_MAGNITUDE)
    for option in schemas["PlanRequest"]["properties"]["module_names"]["anyOf"]:
        if option.get("type") == "string":  # INPUT;BLOCK;OUTPUT, BLOCK with {i} and no other brace
            option["pattern"] = r"^[^;]*;[^;{}]*\{i\}[^;{}]*;[^;]*$"
    cluster = schemas["PlanRequest_Cluster"]["properties"]
    cluster["devices"]["maximum"] = settings.service_max_devices
    cluster["stages_per_device"]["maximum"] = settings.service_max_stages_per_device
    top = min(4096, settings.service_max_microbatches)
    cluster["microbatches"]["anyOf"] = [{"type": "integer", "minimum": 1, "maximum": top},
                                        {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": top},
                                         "minItems": 1}]
    _per_stage(cluster["memory_per_device"], signed=False, max_items=settings.service_max_devices)
    layer = schemas["PlanRequest_Layer"]["properties"]
    for name in ("forward", "backward_input", "backward_weight", "static", "output"):
        layer[name] = {**_magnitude(signed=False), "default": 0.0}
    for name in ("forward", "backward_input", "backward_weight"):
        schemas["PlanRequest_LayerMemory"]["properties"][name] = {**_magnitude(signed=True), "default": 0.0}
