"""What runs inside a plan process: one :func:`pipesched.solver.planning.plan`, its answer sent back.

The plan's own clock ends it at about 85% of ``time_limit_s``; the runner kills the process at
``time_limit_s + kill_grace_s`` if it does not (see :mod:`pipesched.api.solving`).
"""

from __future__ import annotations

from multiprocessing.connection import Connection

from pydantic import ValidationError

from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.io import InputError, describe_validation_error
from pipesched.solver.formats.torch_csv import to_torch_csv
from pipesched.solver.planning import Cluster, Model, Plan, plan
from pipesched.solver.planning.cli import parse_module_names

from .worker import answer


def plan_with_exports(model: Model, cluster: Cluster, method: str, time_limit_s: float,
                      module_names: str | None) -> Plan:
    """The plan with every export filled in, the torch CSV included (as ``pipesched plan`` writes it)."""
    names = parse_module_names(module_names) if module_names else None
    result = plan(model, cluster, method, time_limit_s, names=names)
    if result.schedule is not None and result.exports is not None:
        result.exports = result.exports.model_copy(update={"torch_csv": to_torch_csv(result.schedule)})
    return result


def run_plan(conn: Connection, model_json: str, cluster_json: str, method: str, time_limit_s: float,
             module_names: str | None) -> None:
    """Plan and send ``("ok", plan_json)``, ``("not_applicable", msg)`` or ``("error", msg)``."""
    def work() -> str:
        model, cluster = Model.model_validate_json(model_json), Cluster.model_validate_json(cluster_json)
        try:
            return plan_with_exports(model, cluster, method, time_limit_s, module_names).model_dump_json()
        except ValidationError as e:  # a stage's summed layers left the accepted range: the input's doing
            raise InputError(f"model: the layers of one pipeline stage sum past the accepted range "
                             f"({describe_validation_error(e)}); use smaller units or more stages") from None

    answer(conn, f"{method} plan", work, (NotApplicableError, InputError))
