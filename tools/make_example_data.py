"""Build ``pydaf/data/example_data.npz`` from the text files of Julia's ``test/example_data`` (DataAxesFormats.jl,
MIT-licensed; a copy is in ``../shared/fixtures/julia/example_data``), decoded as Julia's ``src/example_data.jl``
does (``../shared/fixtures/parity/README.md`` §3):

* a file goes to the cells data set if its prefix holds ``c``, to the metacells one if it holds ``m`` (``mc.`` goes
  to both); axes, then vectors, then matrices, each in sorted file order;
* ``axes/<prefix>.<axis>.txt``: one entry per line;
* ``vectors/<prefix>.<axis>.<name>.txt``: one value per line; ``Bool`` if every line is ``true``/``false``, else, if
  every line parses as a ``Float32``, ``UInt32`` (integral, >= 0), ``Int32`` (integral) or ``Float32``, else ``String``;
* ``matrices/<prefix>.<lines axis>.<values axis>.<name>.csv``: line ``j`` is entry ``j`` of the lines axis, field ``i``
  entry ``i`` of the values axis; stored with rows = the values axis, columns = the lines axis, as ``UInt8`` or
  ``UInt16`` if integral in range, else ``Float32`` (each field rounded once, straight to the nearest ``Float32``,
  as Julia parses it).

The archive holds, per data set (``cells``, ``metacells``) and in the order the data sets are built: ``axis/<axis>``
(entries), ``vector/<axis>/<name>`` and ``matrix/<rows>/<columns>/<name>`` (column-major), strings as fixed-width
unicode (loaded without pickle), plus ``order`` (the keys in building order).

Usage: ``python tools/make_example_data.py [--source DIR] [--output FILE]``.
"""

from __future__ import annotations

import argparse
import os
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "fixtures" / "julia" / "example_data"
OUTPUT = ROOT / "pydaf" / "data" / "example_data.npz"
DATA_SETS = {"cells": "c", "metacells": "m"}


def nearest_float32(text: str) -> np.float32:
    """The ``Float32`` nearest to the decimal ``text`` (ties to even), rounding once as Julia's ``parse`` does (going
    through a ``Float64`` first can be off by one unit in rare halfway cases)."""
    rounded = float(text)
    guess = np.float32(rounded)
    if float(guess) == rounded:  # a Float32 already (integers, mostly): nothing to round twice
        return guess
    exact = Fraction(text.strip())
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    finite = [candidate for candidate in candidates if np.isfinite(candidate)]

    def distance(candidate: np.float32) -> tuple[Fraction, int]:
        odd = int(np.frombuffer(candidate.tobytes(), dtype=np.uint32)[0]) & 1
        return abs(Fraction(float(candidate)) - exact), odd

    return min(finite, key=distance)


def lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        raise ValueError(f"{path} must end with a newline")
    return text.split("\n")[:-1]


def cast_vector(values: list[str]) -> np.ndarray:
    if all(value in ("true", "false") for value in values):
        return np.array([value == "true" for value in values], dtype=bool)
    try:
        numbers = np.array([nearest_float32(value) for value in values], dtype=np.float32)
    except ValueError:
        return np.array(values, dtype=str)
    if np.all(numbers == np.round(numbers)):
        return numbers.astype(np.uint32) if numbers.min() >= 0 else numbers.astype(np.int32)
    return numbers


def cast_matrix(matrix: np.ndarray) -> np.ndarray:
    if np.all(matrix == np.round(matrix)) and matrix.min() >= 0:
        if matrix.max() <= 255:
            return matrix.astype(np.uint8)
        if matrix.max() <= 65535:
            return matrix.astype(np.uint16)
    return matrix


def read_matrix(path: Path) -> np.ndarray:
    """The CSV as a ``values axis x lines axis`` column-major matrix (the transpose of the lines)."""
    rows = [[nearest_float32(field) for field in line.split(",")] for line in lines(path)]
    return np.asfortranarray(np.array(rows, dtype=np.float32).T)


def arrays_of(source: Path, which: str, prefix: str) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for kind in ("axes", "vectors", "matrices"):
        for file_name in sorted(os.listdir(source / kind)):
            letters, *parts = file_name.rsplit(".", 1)[0].split(".")
            if prefix not in letters:
                continue
            path = source / kind / file_name
            if kind == "axes":
                arrays[f"{which}/axis/{parts[0]}"] = np.array(lines(path), dtype=str)
            elif kind == "vectors":
                arrays[f"{which}/vector/{parts[0]}/{parts[1]}"] = cast_vector(lines(path))
            else:
                lines_axis, values_axis, name = parts
                arrays[f"{which}/matrix/{values_axis}/{lines_axis}/{name}"] = cast_matrix(read_matrix(path))
    return arrays


def example_arrays(source: Path = SOURCE) -> dict[str, np.ndarray]:
    """Every array of the archive, in building order (and ``order``, the list of their keys)."""
    arrays: dict[str, np.ndarray] = {}
    for which, prefix in DATA_SETS.items():
        arrays.update(arrays_of(source, which, prefix))
    arrays["order"] = np.array(list(arrays), dtype=str)
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    arguments = parser.parse_args()
    arrays = example_arrays(arguments.source)
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(arguments.output, **arrays)
    print(f"{arguments.output}: {len(arrays) - 1} arrays, {arguments.output.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
