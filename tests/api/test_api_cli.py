"""serve and batch refuse bad arguments with one line naming them, not a traceback."""

from __future__ import annotations

import pytest

from pipesched.cli import main


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["serve", "--db", "mysql://root@localhost/test"], "unsupported database URL"),
        (["batch", "/no/such/problems", "-o", "out"], "no such file or folder"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(argv: list[str], words: str, capsys, tmp_path) -> None:  # noqa: ANN001
    if argv[0] == "batch":
        argv = [*argv[:-1], str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pipesched: error:") and words in err
