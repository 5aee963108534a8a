"""``pipesched model transformer``: write the analytic Model (and optionally a Cluster) of a transformer.

Bad input is one line ``pipesched: error: <field>: <reason>`` and exit code 2; nothing is written then.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from pipesched.solver.planning import Model

from .hardware import DEVICES, LINKS, DeviceSpec, LinkSpec
from .hf_config import FAMILIES, load_config
from .hf_model import hf_model, run_config
from .transformer import TransformerConfig, default_cluster, transformer_model

EXIT_USAGE = 2


def _run_options(p: argparse.ArgumentParser) -> None:
    run_ = p.add_argument_group("how it runs")
    run_.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks per stage (with sequence parallelism)")
    run_.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    run_.add_argument("--flash-attention", action=argparse.BooleanOptionalAction, default=True,
                      help="no s² attention activations (default: on)")
    run_.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    run_.add_argument("--zero", type=int, choices=[0, 1, 2, 3], default=0, help="ZeRO stage over --dp ranks")
    run_.add_argument("--dp", type=int, default=1, help="data-parallel ranks (shards optimizer state with --zero)")


def _hardware_and_output(p: argparse.ArgumentParser) -> None:
    hw = p.add_argument_group("hardware")
    hw.add_argument("--device", choices=[*DEVICES, "custom"], required=True)
    hw.add_argument("--peak-tflops", type=float, help="dense 16-bit peak (needed with --device custom)")
    hw.add_argument("--memory-gib", type=float, help="device memory in GiB (needed with --device custom)")
    hw.add_argument("--mfu", type=float, help="achieved fraction of peak (needed with --device custom)")
    hw.add_argument("--hbm-tbps", type=float, help="memory bandwidth in TB/s (default 2.0 for custom)")
    hw.add_argument("--link", choices=[*LINKS, "custom"],
                    help="link between pipeline stages (default: nvlink within one 8-GPU node, else ib)")
    hw.add_argument("--latency-us", type=float, help="link latency per message in µs (needed with --link custom)")
    hw.add_argument("--gbps", type=float, help="link bandwidth in Gbit/s (needed with --link custom)")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", required=True, metavar="MODEL.json")
    out.add_argument("--cluster-output", metavar="CLUSTER.json", help="also write a default Cluster (needs --devices)")
    out.add_argument("--devices", type=int, help="pipeline devices for --cluster-output")
    out.add_argument("--microbatches", type=int, help="microbatches for --cluster-output (default 4 × devices)")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``model`` (with its ``transformer`` and ``hf`` sub-commands) to a ``pipesched`` sub-parser set."""
    model = subparsers.add_parser("model", help="write a Model (layer costs, ms / GiB) from an analytic cost model",
                                  description="Write the planning Model of a network from a cost model.")
    kinds = model.add_subparsers(dest="model_kind", required=True, metavar="KIND")
    p = kinds.add_parser(
        "transformer", help="a decoder-only transformer (embedding, L blocks, final norm + LM head + loss)",
        description="Analytic costs of a decoder-only transformer: standard FLOP counts, Korthikanti et al. "
        "activation memory, ZeRO static memory (docs/costs.md lists every formula and source).")
    shape = p.add_argument_group("shape")
    for flag, what in (("--hidden", "hidden size h"), ("--layers", "transformer blocks L"),
                       ("--heads", "attention heads A"), ("--ffn", "MLP inner width F"), ("--vocab", "vocabulary V"),
                       ("--seq", "sequence length s"), ("--microbatch-size", "sequences per microbatch b")):
        shape.add_argument(flag, type=int, required=True, help=what)
    shape.add_argument("--kv-heads", type=int, help="key/value heads K (grouped-query attention; default: A)")
    shape.add_argument("--gated-mlp", action=argparse.BooleanOptionalAction, default=True,
                       help="SwiGLU-style MLP with three matrices (default: on)")
    _run_options(p)
    _hardware_and_output(p)
    p.set_defaults(handler=run)
    _add_hf_parser(kinds)
    return p


def _add_hf_parser(kinds: argparse._SubParsersAction) -> None:
    families = "\n".join(f"  {k:<12} {what}" for k, (what, _) in FAMILIES.items())
    p = kinds.add_parser(
        "hf", help="a model from its Hugging Face config.json (dense or mixture-of-experts)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Analytic costs of the model a Hugging Face config.json describes, read as the Hub has it\n"
        "(no download). MoE blocks cost their active parameters plus the expert-parallel all-to-all;\n"
        "every layer carries its parameter count (docs/costs.md lists every formula).",
        epilog=f"supported model_type values:\n{families}")
    p.add_argument("config", metavar="CONFIG.json", help="the model's config.json")
    shape = p.add_argument_group("shape of a microbatch")
    shape.add_argument("--seq", type=int, required=True, help="sequence length s")
    shape.add_argument("--microbatch-size", type=int, required=True, help="sequences per microbatch b")
    _run_options(p)
    p.add_argument_group("experts").add_argument(
        "--ep", type=int, default=1, help="expert-parallel ranks per stage (taken from --dp; its all-to-all runs "
        "over NVLink within an 8-GPU node, InfiniBand when the group spans nodes)")
    _hardware_and_output(p)
    p.set_defaults(handler=run_hf)


#: The ``pipesched`` dispatcher calls ``register`` on every command module.
register = add_parser


def _device(args: argparse.Namespace) -> DeviceSpec:
    given = {k: getattr(args, k) for k in ("peak_tflops", "memory_gib", "mfu", "hbm_tbps")
             if getattr(args, k) is not None}
    if args.device == "custom":
        missing = [f"--{k.replace('_', '-')}" for k in ("peak_tflops", "memory_gib", "mfu") if k not in given]
        if missing:
            raise ValueError(f"--device custom needs {', '.join(missing)}")
        return DeviceSpec(name="custom", **given)
    return dataclasses.replace(DEVICES[args.device], **given)  # a preset with the figures given overridden


def _link(args: argparse.Namespace) -> LinkSpec | None:
    given = {k: getattr(args, k) for k in ("latency_us", "gbps") if getattr(args, k) is not None}
    if args.link is None:
        if given:
            raise ValueError("--latency-us / --gbps need --link (custom, or a preset to override)")
        return None
    if args.link == "custom":
        missing = [f"--{k.replace('_', '-')}" for k in ("latency_us", "gbps") if k not in given]
        if missing:
            raise ValueError(f"--link custom needs {', '.join(missing)}")
        return LinkSpec(name="custom", **given)
    return dataclasses.replace(LINKS[args.link], **given)


def _config(args: argparse.Namespace) -> TransformerConfig:
    return TransformerConfig(hidden=args.hidden, layers=args.layers, heads=args.heads,
                             kv_heads=args.kv_heads if args.kv_heads is not None else args.heads,
                             ffn=args.ffn, vocab=args.vocab, seq=args.seq, microbatch_size=args.microbatch_size,
                             tp=args.tp, dtype=args.dtype, flash_attention=args.flash_attention,
                             gated_mlp=args.gated_mlp, optimizer=args.optimizer, zero=args.zero, dp=args.dp)


def run(args: argparse.Namespace) -> int:
    """``model transformer``: build the Model (and Cluster), write them; 0, or 2 with one error line."""
    def build() -> tuple[Model, TransformerConfig, DeviceSpec, LinkSpec | None]:
        config, device, link = _config(args), _device(args), _link(args)
        return transformer_model(config, device, link), config, device, link
    return _write(args, build)


def run_hf(args: argparse.Namespace) -> int:
    """``model hf``: read CONFIG.json, build the Model (and Cluster), write them."""
    def build() -> tuple[Model, TransformerConfig, DeviceSpec, LinkSpec | None]:
        arch = load_config(args.config)
        config = run_config(arch, seq=args.seq, microbatch_size=args.microbatch_size, tp=args.tp, dp=args.dp,
                            zero=args.zero, dtype=args.dtype, optimizer=args.optimizer,
                            flash_attention=args.flash_attention)
        device = _device(args)
        return hf_model(arch, config, device, args.ep), config, device, _link(args)
    return _write(args, build)


def _write(args: argparse.Namespace, build: Callable[[], tuple[Model, TransformerConfig, DeviceSpec,
                                                              LinkSpec | None]]) -> int:
    try:
        model, config, device, link = build()
        cluster = None
        if args.cluster_output:
            if args.devices is None:
                raise ValueError("--cluster-output needs --devices (pipeline devices)")
            cluster = default_cluster(config, device, link, devices=args.devices, microbatches=args.microbatches)
        elif args.devices is not None or args.microbatches is not None:
            raise ValueError("--devices / --microbatches only shape --cluster-output; give that too")
    except ValidationError as e:  # a Cluster field (e.g. --devices 0)
        fields = "; ".join(f"{'.'.join(map(str, x['loc'])) or 'cluster'}: {x['msg'].removeprefix('Value error, ')}"
                           for x in e.errors())
        print(f"pipesched: error: {fields}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as e:
        print(f"pipesched: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return EXIT_USAGE
    outputs = [(args.output, model.model_dump_json(indent=2, exclude_none=True) + "\n")]
    if cluster is not None:
        outputs.append((args.cluster_output, cluster.model_dump_json(indent=2) + "\n"))
    for path, text in outputs:
        try:
            Path(path).write_text(text)
        except OSError as e:
            print(f"pipesched: error: cannot write {path}: {e.strerror or e}", file=sys.stderr)
            return EXIT_USAGE
    print(f"wrote {args.output}: {_summary(model)} on {device.name}"
          + (f"; {args.cluster_output}: {cluster.devices} devices" if cluster is not None else ""), file=sys.stderr)
    return 0


def _summary(model: Model) -> str:
    """``embed + 32 x block + head (block F/B/W ..., static ..., activations ...)``: each heaviest kind once."""
    parts = " + ".join(x.name if x.repeat == 1 else f"{x.repeat} x {x.name}" for x in model.layers)
    blocks = {}
    for x in model.layers:
        if x.name.startswith("block"):
            blocks.setdefault(x.name, x)
    details = "; ".join(f"{x.name} F/B/W {x.forward:.3g}/{x.backward_input:.3g}/{x.backward_weight:.3g} ms, "
                        f"static {x.static:.3g} GiB, activations {x.memory.forward:.3g} GiB per microbatch"
                        for x in blocks.values())
    total = sum((x.parameters or 0) * x.repeat for x in model.layers)
    return f"{parts} ({details}; {total / 1e9:.3g}B parameters)"
