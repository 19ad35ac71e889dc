"""Rebuild Julia's example data sets (``example_cells_daf``, ``example_metacells_daf``) from the shared fixtures,
following ``../shared/fixtures/parity/README.md`` §3. Tests that need them skip when ``../shared`` is absent."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import pydaf

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures"
EXAMPLE_DATA = FIXTURES / "julia" / "example_data"

needs_fixtures = pytest.mark.skipif(not EXAMPLE_DATA.is_dir(),
                                    reason=f"the Julia-written fixtures are not at {FIXTURES}")


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), path
    return text.split("\n")[:-1]


def _cast_vector(values: list[str]) -> np.ndarray:
    if all(value in ("true", "false") for value in values):
        return np.array([value == "true" for value in values])
    try:
        numbers = np.array([np.float32(value) for value in values], dtype=np.float32)
    except ValueError:
        return np.array(values, dtype=object)
    if np.all(numbers == np.round(numbers)):
        if numbers.min() >= 0:
            return numbers.astype(np.uint32)
        return numbers.astype(np.int32)
    return numbers


def _cast_matrix(matrix: np.ndarray) -> np.ndarray:
    if np.all(matrix == np.round(matrix)) and matrix.min() >= 0:
        if matrix.max() <= 255:
            return matrix.astype(np.uint8)
        if matrix.max() <= 65535:
            return matrix.astype(np.uint16)
    return matrix


def example_daf(which: str, daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """Fill ``daf`` as Julia's ``example_daf`` does for ``which`` = ``"c"`` (cells) or ``"m"`` (metacells)."""
    for kind in ("axes", "vectors", "matrices"):
        for name in sorted(os.listdir(EXAMPLE_DATA / kind)):
            prefix, *parts = name.rsplit(".", 1)[0].split(".")
            if which not in prefix:
                continue
            path = EXAMPLE_DATA / kind / name
            if kind == "axes":
                daf.add_axis(parts[0], _lines(path))
            elif kind == "vectors":
                daf.set_vector(parts[0], parts[1], _cast_vector(_lines(path)))
            else:
                lines_axis, values_axis, property_name = parts
                matrix = _cast_matrix(np.loadtxt(path, delimiter=",", dtype=np.float32, ndmin=2).T)
                daf.set_matrix(values_axis, lines_axis, property_name, np.asfortranarray(matrix),
                               relayout=matrix.dtype.kind in "iu")
    return daf


def example_cells_daf() -> pydaf.DafWriter:
    daf = example_daf("c", pydaf.MemoryDaf(name="cells!"))
    return daf.set_scalar("organism", "human").set_scalar("reference", "test")


def example_metacells_daf() -> pydaf.DafWriter:
    return example_daf("m", pydaf.MemoryDaf(name="metacells!"))


def example_chain_daf() -> pydaf.DafWriter:
    return pydaf.chain_writer([example_cells_daf(), example_metacells_daf()], name="chain!")
