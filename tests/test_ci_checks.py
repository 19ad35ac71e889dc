"""CI runs the style and type checks before the tests (issue 24, deliver 6), and a typing fix that changed behaviour.

``.ci/run`` installs the project, runs ``.ci/checks`` (``ruff check``, ``ruff format --check``, ``mypy pydaf``), then
exactly the README's test command; under ``set -euo pipefail`` a failed check ends the run before the tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pydaf.storage_types import STRING_DTYPE, scalar_dtype, scalar_value

ROOT = Path(__file__).resolve().parent.parent


def _commands(path: Path) -> list[str]:
    """The lines of a shell script that are not blank or comments."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def test_ci_runs_the_checks_after_installing_and_before_the_readme_test_command():
    readme_test = next(line.split("  #")[0].strip() for line in (ROOT / "README.md").read_text().splitlines()
                       if "python -m pytest" in line)
    commands = _commands(ROOT / ".ci" / "run")
    assert commands[-1] == readme_test
    assert "set -euo pipefail" in commands
    install, checks = commands.index('pip install -e ".[test]"'), commands.index("bash .ci/checks")
    assert install < checks < len(commands) - 1


def test_the_checks_lint_check_the_format_and_type_check_and_fail_together():
    commands = _commands(ROOT / ".ci" / "checks")
    assert "run ruff check ." in commands
    assert any(command.startswith('run ruff format --check "${FORMAT_SCOPE[@]}"') for command in commands)
    assert "run mypy pydaf" in commands
    assert commands[-1].startswith("echo") and "exit 1" in commands


@pytest.mark.parametrize(("value", "dtype"), [(3, np.int64), (2**63, np.uint64), (-1.5, np.float64), (True, np.bool_),
                                              (np.float32(1), np.float32), ("text", STRING_DTYPE)])
def test_the_dtype_of_a_scalar_is_the_one_it_is_stored_as(value, dtype):
    # (a Python bool/int/float raised AttributeError: it has no dtype)
    assert scalar_dtype(value) == np.dtype(dtype)
    if not isinstance(value, str):
        assert scalar_dtype(value) == np.asarray(scalar_value(value)).dtype
