"""Benchmark: a dafpy user's first steps with ``import pydaf.dafpy as dafpy``, beside the real dafpy (Julia through
juliacall) when it is installed, on the same H5df file.

The script writes once (reused when ``--path`` holds it) an H5df data set: a dense ``Float32`` ``UMIs`` matrix of
``cell`` x ``gene`` in both layouts (default 20,000 x 2,000: 320 MB), a ``donor`` per cell and an ``age`` per donor.
Then each step runs in a fresh child process (so a start-up is paid as a user pays it), ``--repeats`` times,
interleaved between the two sides, after a warm read of the file:

``import``
    ``import dafpy`` (the module mapped onto ``pydaf.dafpy``, or the real one): the start-up;
``open``
    the import, then ``dafpy.h5df(path, "r")``;
``matrix``
    the same, then ``get_np_matrix("cell", "gene", "UMIs")`` and a sum over it (every value read);
``query``
    the same open, then ``get_np_query("@ cell @ gene :: UMIs >| Sum")`` (the per-cell totals) and
    ``daf["@ cell : donor : age"]``.

The table gives best and median seconds per step and side, and pydaf's speed relative to dafpy. Without juliacall
and dafpy (Julia can't be installed on this project's machine), the dafpy rows say so: JuliaPy/PythonCall.jl#762
reports 2.4 s for ``from juliacall import Main`` alone, before Julia loads DataAxesFormats.

Examples::

    python benchmarks/bench_dafpy.py                                   # 320 MB, built once in /tmp
    python benchmarks/bench_dafpy.py --cells 500 --genes 100 --path /tmp/small.h5df --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from child_runs import warm
from recording import OUTPUT_HELP, recording_main

DEFAULT_PATH = "/tmp/pydaf_bench_dafpy.h5df"
STEPS = ("import", "open", "matrix", "query")

#: What each step runs in its child, after ``import dafpy`` (``{path}`` filled in).
_STEP_CODE = {
    "import": "",
    "open": "daf = dafpy.h5df({path!r}, 'r')",
    "matrix": "daf = dafpy.h5df({path!r}, 'r')\ntotal = float(daf.get_np_matrix('cell', 'gene', 'UMIs').sum())",
    "query": ("daf = dafpy.h5df({path!r}, 'r')\ntotals = daf.get_np_query('@ cell @ gene :: UMIs >| Sum')\n"
              "ages = daf['@ cell : donor : age']"),
}

#: How each side makes ``import dafpy`` work: pydaf maps the module name onto ``pydaf.dafpy``, as a user's one-line
#: change (``import pydaf.dafpy as dafpy``) does.
_IMPORT = {
    "pydaf": "import pydaf.dafpy as dafpy",
    "dafpy": "import dafpy",
}


def build(path: str, cells: int, genes: int) -> None:
    """The H5df data set the steps read (written by pydaf's own API)."""
    import pydaf

    rng = np.random.default_rng(0)
    daf = pydaf.H5df(path, "w", name="bench!")
    daf.add_axis("cell", [f"C{index}" for index in range(cells)])
    daf.add_axis("gene", [f"G{index}" for index in range(genes)])
    daf.add_axis("donor", [f"D{index}" for index in range(20)])
    daf.set_vector("donor", "age", rng.integers(20, 80, 20).astype(np.uint32))
    daf.set_vector("cell", "donor", np.array([f"D{index}" for index in rng.integers(0, 20, cells)], dtype=object))
    umis = np.asfortranarray(rng.random((cells, genes), dtype=np.float32))
    daf.set_matrix("cell", "gene", "UMIs", umis)  # (and its other layout: set_matrix relays out by default)
    daf.close()


def _available(side: str) -> bool:
    if side == "pydaf":
        return True
    return importlib.util.find_spec("juliacall") is not None and importlib.util.find_spec("dafpy") is not None


def run_step(side: str, step: str, path: str) -> float:
    """The wall time of a fresh ``python -c`` running the step (start-up included)."""
    code = _IMPORT[side] + "\n" + _STEP_CODE[step].format(path=path)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


@recording_main("bench_dafpy.py")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--path", default=DEFAULT_PATH)
    parser.add_argument("--cells", type=int, default=20_000)
    parser.add_argument("--genes", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args(argv)

    if not os.path.exists(arguments.path):
        build(arguments.path, arguments.cells, arguments.genes)
    warm([arguments.path])
    sides = [side for side in ("pydaf", "dafpy") if _available(side)]
    times: dict[tuple[str, str], list[float]] = {(side, step): [] for side in sides for step in STEPS}
    for _ in range(arguments.repeats):
        for step in STEPS:
            for side in sides:
                times[(side, step)].append(run_step(side, step, arguments.path))

    size = os.path.getsize(arguments.path)
    print(f"data: {arguments.cells:,} cells x {arguments.genes:,} genes, {size / 1e6:.0f} MB H5df; "
          f"{arguments.repeats} runs per step and side, each a fresh process")
    print(f"{'step':<8} {'side':<6} {'best s':>8} {'median s':>9} {'pydaf speed':>12}")
    for step in STEPS:
        for side in ("pydaf", "dafpy"):
            if side not in sides:
                print(f"{step:<8} {side:<6} {'-':>8} {'-':>9} {'-':>12}  (not installed: needs Julia and juliacall)")
                continue
            runs = times[(side, step)]
            ratio = ""
            if side == "pydaf" and "dafpy" in sides:
                ratio = f"{min(times[('dafpy', step)]) / min(runs):>11.1f}x"
            print(f"{step:<8} {side:<6} {min(runs):>8.3f} {statistics.median(runs):>9.3f} {ratio:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
