"""Child programs of the H5df reliability tests, run as ``python tests/h5df_stress.py COMMAND ...`` so that a crash
(segfault, SIGBUS) is a failed test instead of a dead test runner, and so that processes are real processes.

Every property these programs write is *whole*: all its entries hold one value, the generation that wrote it, so a
reader can tell a consistent value (old or new) from a torn or foreign one by looking at it alone.
"""

from __future__ import annotations

import os
import random
import resource
import sys
import threading
import time
import traceback

import numpy as np

import pydaf

N_CELLS, N_GENES, N_NAMES = 20_000, 40, 6


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


Model = dict[tuple[str, ...], float | None]
"""What a data set written by :func:`write_generation` holds: the value of each property, None if absent."""


def initial_model() -> Model:
    model: Model = {("scalar",): 0.0}
    for index in range(N_NAMES):
        model[("v", str(index))] = 0.0
        model[("m", str(index), "cell")] = 0.0
        model[("m", str(index), "gene")] = None
    return model


def model_steps(model: Model, generation: int) -> list[Model]:
    """The states a data set goes through during :func:`write_generation` (each call of it is atomic, so a writer
    killed in the middle leaves one of these)."""
    index = str(generation % N_NAMES)
    value = float(generation)
    steps: list[Model] = []

    def step(**changes: float | None) -> None:
        state = dict(steps[-1] if steps else model)
        for key, new in changes.items():
            kind, layout = key.split("_") if "_" in key else (key, "")
            state[(kind, index, layout) if layout else (kind, index) if kind != "scalar" else ("scalar",)] = new
        steps.append(state)

    match generation % 7:
        case 0 | 2:
            step(v=value)
        case 1:
            step(v=None)
        case 3 | 4:
            step(m_cell=value)
        case 5:
            step(m_cell=None)
            step(m_cell=value)
            step(m_gene=value)
        case 6:
            step(scalar=value)
    return steps


def read_model(daf: pydaf.DafReader) -> Model:
    """What a data set holds, in the form of :func:`initial_model` (raises if any property is not whole)."""
    model: Model = {("scalar",): float(daf.get_scalar("generation"))}
    for index in range(N_NAMES):
        vector = daf.get_vector("cell", f"v{index}", default=None)
        model[("v", str(index))] = None if vector is None else whole_value(vector, f"v{index}")
        for rows, columns in (("cell", "gene"), ("gene", "cell")):
            matrix = daf.get_matrix(rows, columns, f"m{index}", default=None, relayout=False)
            model[("m", str(index), rows)] = None if matrix is None else whole_value(matrix, f"m{index} {rows}")
    return model


def killed_writer(path: str, first_generation: int) -> None:
    """Write generations from ``first_generation`` on, printing each one once it is complete, until killed."""
    daf = pydaf.H5df(path, "r+")
    print("ready", flush=True)
    generation = first_generation
    while True:
        write_generation(daf, generation)
        print(generation, flush=True)
        generation += 1


def out_of_space(path: str, file_size_limit: int) -> int:
    """Writes that can't fit (a file-size limit if ``file_size_limit`` > 0, else a full disk) must each raise a
    :class:`pydaf.DafStorageError` naming the property; a small write must still work after them."""
    if file_size_limit > 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
    daf = pydaf.H5df(path, "r+")
    n_cells, n_genes = daf.axis_length("cell"), daf.axis_length("gene")
    big = np.ones((n_cells, 4 * n_genes), dtype=np.float64)

    def set_big() -> None:
        daf.add_axis("big", [f"b{index}" for index in range(big.shape[1])], overwrite=True)
        daf.set_matrix("cell", "big", "big", big, relayout=False)

    def build_big() -> None:
        with daf.empty_dense_matrix("cell", "gene", "built", "Float64") as values:
            values[:] = 1
        with daf.empty_dense_matrix("gene", "cell", "built", "Float64") as values:
            values[:] = 1

    def overwrite_big() -> None:
        daf.set_vector("cell", "v0", np.ones(n_cells), overwrite=True)  # fits: the old value's space is kept
        daf.set_matrix("cell", "gene", "m1", np.ones((n_cells, n_genes)) * 3, overwrite=True, relayout=False)

    attempts = {"big": set_big, "built": build_big, "m0": lambda: daf.relayout_matrix("cell", "gene", "m0"),
                "m1": overwrite_big}
    failures = []
    for name, attempt in attempts.items():
        try:
            attempt()
            failures.append(f"{name}: no error")
        except pydaf.DafStorageError as error:
            if f": {name}" not in str(error):
                failures.append(f"{name}: the error does not name it: {error}")
        except BaseException:  # reported and failing the run
            failures.append(f"{name}: {traceback.format_exc()}")
    daf.set_scalar("after", 1)
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


def processes(path: str, seconds: float, role: str) -> int:
    """One of the processes sharing a file: the ``writer`` opens it, writes a few generations and closes it, again and
    again; a ``reader`` opens it, checks every property is whole, and closes it, again and again. A lock conflict is
    a :class:`pydaf.DafLockedError` (and a retry); anything else fails the run."""
    stop = time.monotonic() + seconds
    done = locked = 0
    generation = 1_000_000 * os.getpid()  # (distinct per writer; whole values are all these checks need)
    while time.monotonic() < stop:
        try:
            if role == "writer":
                daf = pydaf.H5df(path, "r+")
                for _ in range(3):
                    generation += 1
                    write_generation(daf, generation % 1_000_000_007)
            else:
                read_model(pydaf.H5df(path, "r"))
            done += 1
        except pydaf.DafLockedError:
            locked += 1
        daf = None
        time.sleep(random.uniform(0.0, 0.05))
    print(f"{role}: {done} done, {locked} locked", flush=True)
    return 0 if done else 1


def read_everything(daf: pydaf.DafReader) -> None:
    """Read every property of a data set, whatever it holds (for hostile files)."""
    for name in daf.scalars_set():
        daf.get_scalar(name)
    axes = sorted(daf.axes_set())
    for axis in axes:
        daf.axis_vector(axis)
        for name in daf.vectors_set(axis):
            np.asarray(daf.get_vector(axis, name)).sum()
    for rows in axes:
        for columns in axes:
            for name in daf.matrices_set(rows, columns, relayout=False):
                matrix = daf.get_matrix(rows, columns, name, relayout=False)
                (matrix.sum() if hasattr(matrix, "sum") else None)


def hostile(paths: list[str]) -> int:
    """Open and read each file: every one must give a :class:`pydaf.DafError` or a read, never anything else; memory
    is limited to 4 GB so a huge allocation fails the run instead of the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    bad = 0
    for path in paths:
        try:
            read_everything(pydaf.H5df(path, "r"))
            print("read", path, flush=True)
        except pydaf.DafError as error:
            print("error", path, str(error).splitlines()[0], flush=True)
        except BaseException:  # reported and failing the run
            bad += 1
            print("BAD", path, traceback.format_exc(), file=sys.stderr, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "threads":
        sys.exit(threads(arguments[0], float(arguments[1]), arguments[2]))
    if command == "processes":
        sys.exit(processes(arguments[0], float(arguments[1]), arguments[2]))
    if command == "hostile":
        sys.exit(hostile(arguments))
    if command == "out-of-space":
        sys.exit(out_of_space(arguments[0], int(arguments[1])))
    if command == "killed-writer":
        killed_writer(arguments[0], int(arguments[1]))
    raise SystemExit(f"unknown command: {command}")
