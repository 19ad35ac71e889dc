"""The hostile campaign of issue 25 (``tests/campaign.py``): damaged ZarrDaf directories and archives, ZipDaf
archives, chains, H5df undo journals, conversions and the command line each end in a correct read (checked against
the known values, or against what an independent reader makes of the damaged bytes) or a typed ``DafError`` — never a
crash, hang, escape, loss or an allocation beyond the data's size. Probes run in child processes (``RLIMIT_AS``,
timeouts); a reproducible sample by default, the full campaign (750 probes per surface) with ``PYDAF_SOAK=1``."""

from __future__ import annotations

import os

import pytest

from . import campaign

SOAK = float(os.environ.get("PYDAF_SOAK", "0")) >= 1
#: Probes per surface: a sample by default (the whole file runs in about a minute on one core), 750 in the soak.
COUNT = 750 if SOAK else 10
SEED = 25

#: Probes that once failed, found by the campaign and fixed since: (surface, seed, index) -> the defect. Each runs
#: alone and must stay a correct read or a typed error.
PINNED: dict[tuple[str, int, int], str] = {
    ("zarr_zip", 2025, 297): "a group archive with 3 byte flips: a local header's name running past the end of the "
                             "file escaped as the store's private exception",
}


def _describe(results: list[dict]) -> list[str]:
    return [f"{result['surface']} #{result['index']} {result['outcome']}: {result['name']} | {result['detail']}"
            for result in results]


def test_the_known_values_are_the_data():
    """The known values come from a MemoryDaf and agree with numpy's reading of the constants."""
    known = campaign.expected()
    assert known["scalar"] == '"human"' and known["gene"] == '["g0", "g1", "g2", "g3", "g4"]'
    assert known["note"].count('"x"') == 1 and known["labels"].count('"a"') == 1


@pytest.mark.parametrize("kind", ["h5df", "files", "zarr", "zarrzip", "zip"])
def test_every_pristine_format_reads_correct(kind, tmp_path):
    """The control: an undamaged data set of each format reads as the known values through every entry point."""
    path = os.path.join(tmp_path, campaign.SUFFIXES[kind])
    campaign.build(path, kind)
    outcomes = campaign.read_all(lambda: campaign._pydaf().open_daf(path, "r"))
    assert campaign.judge(outcomes, None) == ("correct", "")


def test_the_oracles_read_changed_bytes(tmp_path):
    """The independent readers see a flipped value where pydaf must (so a changed value is checked, not assumed)."""
    import numpy as np
    folder = str(tmp_path)
    path = os.path.join(folder, "x.daf.zarr")
    campaign.build(path, "zarr")
    chunk = os.path.join(path, "vectors", "cell", "age", "c", "0")
    campaign.flip(chunk, 8 * 5, 0x40)  # age[5] = 5 ^ 0x40
    ages = np.arange(40)
    ages[5] ^= 0x40
    assert campaign.zarr_oracle(path)["age"] == campaign.canon(ages)
    archive = os.path.join(folder, "y.daf.zip")
    campaign.build(archive, "zip")
    extracted = os.path.join(folder, "y.daf")
    assert campaign.raw_extract(archive, extracted)
    assert campaign.files_oracle(extracted)["age"] == campaign.expected()["age"]


@pytest.mark.parametrize("surface", campaign.SURFACES)
def test_the_campaign_finds_no_failure(surface):
    specs = campaign.make_probes(surface, COUNT, SEED)
    results = campaign.run_probes(specs, batch=50 if SOAK else COUNT, jobs=2 if SOAK else 1)
    assert len(results) == COUNT
    failures = [result for result in results if result["outcome"] in campaign.FAILURES]
    assert _describe(failures) == []
    counts = campaign.summary(results)[surface]
    assert counts.get("correct", 0) + counts.get("DafError", 0) == COUNT


@pytest.mark.parametrize("key", list(PINNED), ids=[f"{surface}-{seed}-{index}" for surface, seed, index in PINNED])
def test_a_probe_that_once_failed_stays_fixed(key):
    surface, seed, index = key
    spec = campaign.make_probes(surface, index + 1, seed)[index]
    (result,) = campaign.run_probes([spec], batch=1)
    assert result["outcome"] not in campaign.FAILURES, _describe([result])


def test_a_crash_and_a_hang_are_attributed_to_their_probe():
    """The runner itself: a probe that kills its child or blocks is reported as such, and its batch's other probes
    still run (each re-run alone)."""
    specs = campaign.make_probes("zarr_dir", 3, 7)
    specs[1] = {**specs[1], "surface": "selftest", "kind": "segfault"}
    results = campaign.run_probes(specs, batch=3)
    by_index = {result["index"]: result for result in results}
    assert by_index[1]["outcome"] == "crash"
    assert by_index[0]["outcome"] in ("correct", "DafError") and by_index[2]["outcome"] in ("correct", "DafError")
    hang = campaign.run_probes([{**specs[0], "surface": "selftest", "kind": "hang", "seconds": 2}], batch=1)
    assert hang[0]["outcome"] == "hang"
