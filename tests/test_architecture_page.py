"""docs/architecture.md draws the layers that tests/test_architecture.py enforces: the same packages, in the same
order, and the files it names exist, so the page cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from .test_architecture import LAYERS

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
NAME_COLUMN = 30  # the width of the diagram's name column


def _diagram_layers() -> list[set[str]]:
    """The layers of the page's diagram, bottom up (a row whose names end with a comma goes on in the next row)."""
    diagram = re.search(r"^```text\n(.*?)^```", PAGE.read_text(), re.MULTILINE | re.DOTALL)
    assert diagram is not None
    rows: list[str] = []
    for line in diagram.group(1).splitlines():
        names = line[:NAME_COLUMN].strip()
        if rows and rows[-1].endswith(","):
            rows[-1] += " " + names
        else:
            rows.append(names)
    return [{name.strip().rstrip("/") for name in row.split(",") if name.strip()} for row in reversed(rows)]


def test_the_diagram_has_the_layers_of_the_architecture_test() -> None:
    assert _diagram_layers() == LAYERS


def test_the_files_the_page_names_exist() -> None:
    named = set(re.findall(r"`((?:pydaf/)?(?:[a-z_]+/)+[a-z_]+\.py)", PAGE.read_text()))
    missing = [path for path in sorted(named)
               if not (ROOT / path).exists() and not (ROOT / "pydaf" / path).exists()]
    assert len(named) > 20 and missing == []
