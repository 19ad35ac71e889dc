"""Zero-copy promises of H5df on a ≥ 1 GB matrix, measured in fresh processes (real files, real maps, real RSS)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

N_ROWS, N_COLUMNS = 16_384, 16_384  # Float32: exactly 1 GiB

WRITE = textwrap.dedent("""
    import sys, numpy as np, pydaf
    daf = pydaf.H5df(sys.argv[1], "w", name="big!")
    daf.add_axis("cell", [f"c{{i}}" for i in range({rows})]).add_axis("gene", [f"g{{i}}" for i in range({columns})])
    with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32") as matrix:
        matrix[:, 7] = np.arange({rows}, dtype=np.float32)  # the rest stays zero (never touched)
""")

READ = textwrap.dedent("""
    import json, sys, time, psutil, numpy as np, pydaf
    process = psutil.Process()
    daf = pydaf.H5df(sys.argv[1], "r")
    before = process.memory_info().rss
    started = time.perf_counter()
    matrix = daf.get_matrix("cell", "gene", "UMIs")
    elapsed = time.perf_counter() - started
    after = process.memory_info().rss
    address = matrix.__array_interface__["data"][0]
    mapped = False
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == sys.argv[1]:
                low, high = (int(value, 16) for value in fields[0].split("-"))
                mapped |= low <= address and address + matrix.nbytes <= high
    column = matrix[:, 7]
    print(json.dumps({{"rss_growth": after - before, "seconds": elapsed, "mapped": mapped, "nbytes": matrix.nbytes,
                      "shape": list(matrix.shape), "writeable": bool(matrix.flags.writeable),
                      "fortran": bool(matrix.flags.f_contiguous),
                      "column_ok": bool(np.array_equal(column, np.arange({rows}, dtype=np.float32))),
                      "other_zero": float(matrix[:, 8].sum())}}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux only)")
def test_fetching_a_1gb_matrix_maps_it_without_reading(tmp_path):
    path = str(tmp_path / "big.h5df")
    code = {"rows": N_ROWS, "columns": N_COLUMNS}
    subprocess.run([sys.executable, "-c", WRITE.format(**code), path], check=True)
    result = subprocess.run([sys.executable, "-c", READ.format(**code), path], check=True, capture_output=True,
                            text=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["nbytes"] >= 1 << 30
    assert report["shape"] == [N_ROWS, N_COLUMNS]
    assert report["mapped"], "the matrix must lie inside a map of the file"
    assert not report["writeable"] and report["fortran"]
    assert report["rss_growth"] < 50 * 1024 * 1024, report
    assert report["column_ok"] and report["other_zero"] == 0
