"""docs/costs.md and the example models stay what the code produces: the example files are the
CLI's output, and the worked Problem is the uniform split of the 8B example with the quoted results."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from pipesched.solver import Problem, solve
from pipesched.solver.costmodel.cli import add_parser
from pipesched.solver.planning import Model

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "costs.md").read_text()
EXAMPLES = {
    "model_llama3_8b.json": "--hidden 4096 --layers 32 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256 "
                            "--seq 8192 --microbatch-size 1 --device h100",
    "model_llama3_70b_tp8.json": "--hidden 8192 --layers 80 --heads 64 --kv-heads 8 --ffn 28672 --vocab 128256 "
                                 "--seq 4096 --microbatch-size 1 --tp 8 --zero 1 --dp 8 --device h100",
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_models_are_the_cli_output(name: str, tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="pipesched")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["model", "transformer", *EXAMPLES[name].split(), "-o", str(tmp_path / name)])
    assert args.handler(args) == 0
    assert (tmp_path / name).read_text() == (ROOT / "examples" / name).read_text()


def test_the_documented_command_makes_the_8b_example() -> None:
    command = DOC.split("```bash\npipesched model transformer ")[1].split(" -o ")[0].replace("\\\n", " ")
    assert command.split() == EXAMPLES["model_llama3_8b.json"].split()


def _worked_problem() -> Problem:
    block = re.search(r"```json\n(\{\"devices\": 8.*?)```", DOC, re.S)
    assert block, "docs/costs.md lost its worked Problem"
    return Problem.model_validate(json.loads(block.group(1)))


def test_the_worked_problem_is_the_uniform_split_of_the_example_model() -> None:
    layers = Model.model_validate_json((ROOT / "examples" / "model_llama3_8b.json").read_text()).expanded()
    split = [(0, 5), *((5 + 4 * i, 9 + 4 * i) for i in range(6)), (29, 34)]
    problem = _worked_problem()
    for field, attr in (("forward", "forward"), ("backward_input", "backward_input"),
                        ("backward_weight", "backward_weight")):
        expected = [sum(getattr(x, attr) for x in layers[a:b]) for a, b in split]
        assert getattr(problem.costs, field) == pytest.approx(expected, abs=1e-3), field
    assert problem.memory.forward == pytest.approx([sum(x.mem_forward for x in layers[a:b]) for a, b in split],
                                                   abs=1e-3)
    statics = [sum(x.static for x in layers[a:b]) for a, b in split]
    assert problem.memory.limit == pytest.approx([80 - s for s in statics], abs=1e-2)


def test_the_quoted_step_times_are_what_the_recipes_give() -> None:
    problem = _worked_problem()
    for method, pattern in (("1f1b", r"1F1B (\d+) ms per step"), ("zb-h1", r"ZB-H1\s+(\d+) ms")):
        quoted = re.search(pattern, DOC)
        assert quoted, f"docs/costs.md no longer quotes {method}'s step time"
        assert int(quoted.group(1)) == round(solve(problem, method).makespan), method
