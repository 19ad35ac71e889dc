"""The README's code blocks run as written, in order, in an empty folder.

Every ```python block of README.md is run, one after the other, as one script in a new empty directory (a block may
use what an earlier one made), in a child process so that the files it leaves open cannot affect the suite. Blocks
that need Julia (they import ``pydaf.julia``) run only when Julia is there. The ```sh blocks that the test can run
without Julia or network (the ``pydaf`` commands) run too, after the Python blocks, in the same directory.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(language: str) -> list[str]:
    return [body for kind, body in _BLOCK.findall(README.read_text()) if kind == language]


def _needs_julia(block: str) -> bool:
    return "pydaf.julia" in block or "julia " in block or "julia/" in block


def _julia_available() -> bool:
    from pydaf.julia.setup import julia_unavailable_reason

    return julia_unavailable_reason() is None


def test_readme_has_python_blocks() -> None:
    assert len(_blocks("python")) >= 4


def _commands(block: str) -> list[str]:
    """The ``pydaf`` commands of a shell block (a block that runs Julia is skipped whole: its commands need Julia's
    output)."""
    if "julia " in block:
        return []
    commands = []
    for line in block.splitlines():
        for part in line.split("  #")[0].split("&&"):
            if part.strip().startswith("pydaf "):
                commands.append(part.strip())
    return commands


def test_readme_blocks_run_in_an_empty_folder(tmp_path: Path) -> None:
    blocks = [block for block in _blocks("python") if not _needs_julia(block) or _julia_available()]
    script = "\n".join(f"# --- README block {index}\n{block}" for index, block in enumerate(blocks))
    work = tmp_path / "work"
    work.mkdir()
    # (given as ``-c``, as a notebook's cells are run: dask's worker processes would import a script's file again)
    result = subprocess.run([sys.executable, "-c", script], cwd=work, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"README blocks failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    commands = [command for block in _blocks("sh") for command in _commands(block)]
    assert len(commands) >= 5, commands
    for command in commands:  # in the same folder: they use what the Python blocks made
        result = subprocess.run([sys.executable, "-m", "pydaf", *shlex.split(command)[1:]], cwd=work,
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{command}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
