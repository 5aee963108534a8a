"""A split written the way training frameworks take it, and read back.

- Megatron-LM ``--pipeline-model-parallel-layout``: stages in model order separated by ``|``, one
  letter per layer (``E`` the embedding / input module, ``t`` a transformer block, ``L`` the loss /
  output module), ``x*n`` and ``(...)*n`` repeat, commas and spaces are ignored (e.g.
  ``Et*3|(tt|)*29,m|L`` in Megatron's docs). With loop placement Megatron puts stage ``s`` on pipeline
  rank ``s mod p``, virtual rank ``s div p``, as pipesched does; V placement has no Megatron equivalent.
- torchtitan ``module_fqns_per_model_part``: one list of module names per stage, from a pattern
  (default: torchtitan 0.3.0's Llama names, :data:`TORCHTITAN_NAMES`; ``{i}`` counts blocks from 0).
  torchtitan ignores a name its model does not have, so a wrong name silently drops that module from
  every stage: the default must be the package's own (its ``models/llama3`` has ``tok_embeddings``,
  ``layers``, ``norm`` and ``lm_head``).

Which layers are input, block and output follows :func:`~.split.core`: the span of the most repeated
family of layer kinds is the blocks, what precedes it the input module, what follows it the output
module, except a multi-token-prediction layer there (a kind of family ``mtp``, as ``pipesched model hf``
writes DeepSeek-V3's): Megatron's ``m``, and in torchtitan (which has no MTP module) the name ``mtp``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .model import ExpandedLayer
from .split import core, family

INPUT, BLOCK, OUTPUT, MTP = "E", "t", "L", "m"

#: The torchtitan release whose Llama module names are the default (and whose flags ``export`` writes).
TORCHTITAN_VERSION = "0.3.0"
#: torchtitan's Llama names as ``INPUT;BLOCK;OUTPUT`` (the ``--module-names`` syntax): the one place they live.
TORCHTITAN_NAMES = "tok_embeddings;layers.{i};norm,lm_head"


class ModuleNames(BaseModel):
    """How a framework names the input module, block ``i`` and the output module (default: torchtitan's
    Llama names, :data:`TORCHTITAN_NAMES`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: list[str] = Field(default_factory=lambda: _default_part(0))
    block: str = Field(TORCHTITAN_NAMES.split(";")[1],
                       description="Python format string; {i} is the block's index from 0.")
    output: list[str] = Field(default_factory=lambda: _default_part(2))

    @field_validator("block")
    @classmethod
    def _one_index(cls, block: str) -> str:
        """Formatted for every block later: a pattern that does not format (a lone brace, another
        field) must be refused here, with the input, not fail an export after the plan is made."""
        try:
            ok = "{i}" in block and block.format(i=0) != block.format(i=1)
        except (ValueError, KeyError, IndexError, AttributeError):
            ok = False
        if not ok:
            raise ValueError(f"the block pattern must contain {{i}} and no other braces, got {block!r}")
        return block

    def text(self) -> str:
        """The ``INPUT;BLOCK;OUTPUT`` form (what ``--module-names`` and the API's ``module_names`` take)."""
        return f"{','.join(self.input)};{self.block};{','.join(self.output)}"


def _default_part(k: int) -> list[str]:
    return TORCHTITAN_NAMES.split(";")[k].split(",")


def _roles(layers: list[ExpandedLayer]) -> str:
    lo, hi = core(layers)
    return INPUT * lo + BLOCK * (hi - lo) + "".join(MTP if family(x.kind) == "mtp" else OUTPUT for x in layers[hi:])


def _compress(stage: str) -> str:
    return re.sub(r"(.)\1+", lambda m: f"{m.group(1)}*{len(m.group(0))}", stage)


def megatron_layout(layers: list[ExpandedLayer], bounds: tuple[int, ...] | list[int]) -> str:
    """The ``pipeline_model_parallel_layout`` string of a split (stage bounds over expanded layers)."""
    roles = _roles(layers)
    return "|".join(_compress(roles[bounds[s]:bounds[s + 1]]) for s in range(len(bounds) - 1))


def _expand_repeats(text: str) -> str:
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while (m := group.search(text)) is not None:
        text = text[:m.start()] + m.group(1) * int(m.group(2)) + text[m.end():]
    return re.sub(r"([A-Za-z])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)


def parse_megatron_layout(text: str) -> list[str]:
    """The stages of a layout string, each as its letters (``"Et*2|tL"`` -> ``["Ett", "tL"]``).

    Raises ValueError naming the first character it does not accept."""
    flat = _expand_repeats(re.sub(r"[,\s]", "", text))
    bad = re.search(r"[^A-Za-z|]", flat)
    if bad:
        raise ValueError(f"layout {text!r}: unexpected {bad.group(0)!r} (accepted: letters, '|', "
                         "'x*n', '(...)*n', commas)")
    return flat.split("|")


def bounds_from_layout(text: str, layers: list[ExpandedLayer]) -> list[int]:
    """Stage bounds over ``layers`` from a layout string; its letters must match the layers' roles."""
    stages = parse_megatron_layout(text)
    joined = "".join(stages)
    roles = _roles(layers)
    if joined != roles:
        raise ValueError(f"layout {text!r} has {len(joined)} layers {joined[:40]!r}, the model's are "
                         f"{len(roles)} {roles[:40]!r}")
    bounds = [0]
    for st in stages:
        bounds.append(bounds[-1] + len(st))
    return bounds


def torchtitan_fqns(layers: list[ExpandedLayer], bounds: tuple[int, ...] | list[int],
                    names: ModuleNames | None = None) -> list[list[str]]:
    """``module_fqns_per_model_part``: each stage's module names, in model order."""
    names = names or ModuleNames()
    roles = _roles(layers)
    first_block = roles.find(BLOCK) if BLOCK in roles else 0
    out: list[list[str]] = []
    for s in range(len(bounds) - 1):
        fqns: list[str] = []
        for k in range(bounds[s], bounds[s + 1]):
            new = {INPUT: names.input, OUTPUT: names.output, MTP: ["mtp"]}.get(roles[k]) \
                or [names.block.format(i=k - first_block)]
            fqns += [x for x in new if x not in fqns]
        out.append(fqns)
    return out
