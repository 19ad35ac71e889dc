"""Child programs of the H5df reliability tests, run as ``python tests/h5df_stress.py COMMAND ...`` so that a crash
(segfault, SIGBUS) is a failed test instead of a dead test runner, and so that processes are real processes.

Every property these programs write is *whole*: all its entries hold one value, the generation that wrote it, so a
reader can tell a consistent value (old or new) from a torn or foreign one by looking at it alone.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import traceback

import numpy as np

import pydaf

N_CELLS, N_GENES, N_NAMES = 20_000, 40, 6


def soak() -> float:
    """The soak multiplier of long tests (env ``PYDAF_SOAK``, default 1)."""
    return float(os.environ.get("PYDAF_SOAK", "1"))


def create(path: str, n_cells: int = N_CELLS, n_genes: int = N_GENES) -> pydaf.DafWriter:
    """A fresh data set with the axes, and generation 0 of every vector and matrix."""
    daf = pydaf.H5df(path, "w")
    daf.add_axis("cell", [f"c{index}" for index in range(n_cells)])
    daf.add_axis("gene", [f"g{index}" for index in range(n_genes)])
    for index in range(N_NAMES):
        daf.set_vector("cell", f"v{index}", np.zeros(n_cells))
        daf.set_matrix("cell", "gene", f"m{index}", np.zeros((n_cells, n_genes), dtype=np.float32), relayout=False)
    daf.set_scalar("generation", 0)
    return daf


def write_generation(daf: pydaf.DafWriter, generation: int) -> None:
    """One write of the writer loop: sets, overwrites, deletes, builders and relayouts, chosen by the generation."""
    index = generation % N_NAMES
    n_cells, n_genes = daf.axis_length("cell"), daf.axis_length("gene")
    vector, matrix = f"v{index}", f"m{index}"
    match generation % 7:
        case 0:
            daf.set_vector("cell", vector, np.full(n_cells, float(generation)), overwrite=True)
        case 1:
            daf.delete_vector("cell", vector, must_exist=False)
        case 2:
            with daf.empty_dense_vector("cell", vector, "Float64", overwrite=True) as values:
                values[:] = generation
        case 3:
            daf.set_matrix("cell", "gene", matrix, np.full((n_cells, n_genes), generation, dtype=np.float32),
                           overwrite=True, relayout=False)
        case 4:
            with daf.empty_dense_matrix("cell", "gene", matrix, "Float32", overwrite=True) as values:
                values[:] = generation
        case 5:
            daf.delete_matrix("cell", "gene", matrix, must_exist=False, relayout=False)
            daf.set_matrix("cell", "gene", matrix, np.full((n_cells, n_genes), generation, dtype=np.float32),
                           relayout=False)
            daf.relayout_matrix("cell", "gene", matrix, overwrite=True)
        case 6:
            daf.set_scalar("generation", generation, overwrite=True)


def whole_value(values: np.ndarray, what: str) -> float:
    """The one value all entries of a property hold; raises if they differ (a torn or foreign value)."""
    flat = np.asarray(values).reshape(-1)
    first = flat[0]
    if not (flat == first).all() or first != int(first) or first < 0:
        raise AssertionError(f"{what}: not a whole generation (first values: {flat[:5]}, "
                             f"distinct: {np.unique(flat)[:8]})")
    return float(first)


def threads(path: str, seconds: float, readers_through: str) -> int:
    """One writer thread and 8 reader threads on one file for ``seconds``. ``readers_through`` is ``same`` (the
    writer's own data set), ``handle`` (a second ``H5df`` on the same path) or ``link`` (a second one through a
    symbolic link). Readers hold some arrays and check later that they never changed."""
    daf = create(path)
    if readers_through == "same":
        reader = daf
    else:
        other = path if readers_through == "handle" else path + ".link"
        if readers_through == "link":
            os.symlink(os.path.basename(path), other)
        reader = pydaf.H5df(other, "r")
    stop = time.monotonic() + seconds
    failures: list[str] = []
    counts = [0, 0]

    def writer() -> None:
        generation = 0
        try:
            while time.monotonic() < stop and not failures:
                generation += 1
                write_generation(daf, generation)
                if generation % 3 == 0:
                    daf.empty_cache()
        except BaseException:  # reported and failing the run
            failures.append(traceback.format_exc())
        counts[0] = generation

    def read(seed: int) -> None:
        generator = random.Random(seed)
        held: list[tuple[np.ndarray, float, str]] = []
        try:
            while time.monotonic() < stop and not failures:
                index = generator.randrange(N_NAMES)
                vector = reader.get_vector("cell", f"v{index}", default=None)
                if vector is not None:
                    held.append((vector, whole_value(vector, f"v{index}"), f"v{index}"))
                rows, columns = ("cell", "gene") if generator.random() < 0.5 else ("gene", "cell")
                matrix = reader.get_matrix(rows, columns, f"m{index}", default=None, relayout=False)
                if matrix is not None:
                    held.append((matrix, whole_value(matrix, f"m{index}"), f"m{index}"))
                counts[1] += 1
                if generator.random() < 0.3:
                    reader.empty_cache()
                if len(held) > 12:
                    for array, value, name in held:
                        if whole_value(array, name) != value:
                            raise AssertionError(f"a held array of {name} changed from {value}")
                        if array.flags.writeable:
                            raise AssertionError(f"a held array of {name} is writable")
                    held = held[-4:]
        except BaseException:  # reported and failing the run
            failures.append(traceback.format_exc())

    workers = [threading.Thread(target=writer)] + [threading.Thread(target=read, args=(seed,)) for seed in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(f"writes: {counts[0]} reads: {counts[1]}", flush=True)
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures or counts[0] < 10 or counts[1] < 10 else 0


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "threads":
        sys.exit(threads(arguments[0], float(arguments[1]), arguments[2]))
    raise SystemExit(f"unknown command: {command}")
