"""Optional test dependencies: skip with a reason on a machine without them, fail in CI.

A test that needs an optional package (torch, highspy, pgqueuer, Ray ...) must not pass by
skipping where that package is supposed to be there. ``.ci/run`` sets one ``PIPESCHED_REQUIRE_*``
flag per optional part; under the flag of a package, its absence fails the test instead of
skipping it. Use it in a test body, a fixture, or at the top of a test module (all its tests need it);
never at module level of a helper other test files import:

    torch = require("torch")                      # imports and returns the module
    require("highspy", load=False)                # only checks it is installed (importing it here
                                                  # would break OR-Tools in this process)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

import pytest

#: Module -> (the flag CI sets when it must be present, the pip extra that installs it).
REQUIRED_BY: dict[str, tuple[str, str]] = {
    "torch": ("PIPESCHED_REQUIRE_TORCH", "runtime"),
    "transformers": ("PIPESCHED_REQUIRE_TORCH", "dev"),  # builds Hub models on torch's meta device
    "highspy": ("PIPESCHED_REQUIRE_HIGHS", "highs"),
    "psycopg": ("PIPESCHED_REQUIRE_POSTGRES", "postgres"),
    "pgqueuer": ("PIPESCHED_REQUIRE_SCALEOUT", "scaleout"),
    "ray": ("PIPESCHED_REQUIRE_SCALEOUT", "ray"),
    "playwright": ("PIPESCHED_REQUIRE_BROWSER", "dev"),
}


def flag_of(module: str) -> str:
    """The ``PIPESCHED_REQUIRE_*`` flag that makes ``module`` (or its top-level package) mandatory."""
    top = module.split(".", 1)[0]
    if top not in REQUIRED_BY:
        raise KeyError(f"{top!r} has no PIPESCHED_REQUIRE_* flag: add it to tests/requires.py REQUIRED_BY "
                       f"(known: {', '.join(sorted(REQUIRED_BY))})")
    return REQUIRED_BY[top][0]


def need(ok: bool, what: str, flag: str) -> None:
    """Nothing when ``ok``; else fail under ``flag`` (CI) and skip with ``what`` as the reason otherwise."""
    if ok:
        return
    if os.environ.get(flag) == "1":
        pytest.fail(f"{flag}=1 but {what}", pytrace=False)
    pytest.skip(what, allow_module_level=True)


def require(module: str, *, load: bool = True) -> ModuleType | None:
    """``module`` imported (``load=False``: only found, returns None), or skip/fail as :func:`need` says."""
    flag = flag_of(module)
    extra = REQUIRED_BY[module.split(".", 1)[0]][1]
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:  # a missing parent package
        found = False
    need(found, f"{module} is not installed (pip install -e '.[{extra}]')", flag)
    if not load:
        return None
    try:
        return importlib.import_module(module)
    except ImportError as e:  # installed but broken: never a silent pass
        need(False, f"{module} is installed but cannot be imported: {e}", flag)
        raise  # unreachable: need() skipped or failed
