"""Hostile persistent chains (issue 25, class 7): cycles recorded by ``complete_chain``, bad ``base_daf_*`` records, a
base replaced by a directory, a FIFO or another format, and chains or views nested beyond any reasonable depth. Each
is a typed ``DafError`` naming the chain leaf that holds the record and the base it names, raised before anything is
written; openings that could hang or crash run in a child process with a timeout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest

import pydaf
from pydaf.composition.complete import MAX_CHAIN_DEPTH
from pydaf.composition.views import MAX_VIEW_NESTING

from .soak import soak

FORMATS = ["h5df", "daf", "daf.zarr", "daf.zip", "daf.zarr.zip"]
GROUPS = ["h5dfs#/cells", "dafs.zip#/cells", "dafs.zarr.zip#/cells"]
CHILD_TIMEOUT = 120

# Opens each chain leaf given (a JSON list of [label, path]) with complete_daf and reads everything, reporting one
# JSON line per leaf: what happened, the error's class and message.
_CHILD = r"""
import json, sys
import pydaf
for label, path in json.loads(sys.argv[1]):
    try:
        chain = pydaf.complete_daf(path)
        for axis in chain.axes_set():
            for name in chain.vectors_set(axis):
                chain.get_vector(axis, name)
        outcome, kind, message = "ok", "", ""
    except pydaf.DafError as error:
        outcome, kind, message = "typed", type(error).__name__, str(error)
    except BaseException as error:
        outcome, kind, message = "untyped", type(error).__name__, str(error)
    print(json.dumps({"label": label, "outcome": outcome, "class": kind, "message": message[:20000]}), flush=True)
"""


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def _open_in_child(leaves: list[tuple[str, str]], timeout: float = CHILD_TIMEOUT) -> dict[str, dict]:
    """The outcome of ``complete_daf`` on each leaf, in a child process (which must end within ``timeout``)."""
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(leaves)], capture_output=True, text=True,
                              timeout=timeout, env=_child_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"opening the chains did not end within {timeout} s: {[label for label, _ in leaves]}")
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = {report["label"]: report for report in map(json.loads, done.stdout.splitlines())}
    assert set(outcomes) == {label for label, _ in leaves}, done.stderr[-3000:]
    return outcomes


def _base(path: str) -> pydaf.DafWriter:
    return pydaf.open_daf(path, "w+").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])


def _scalars_of(path: str) -> set[str]:
    return set(pydaf.open_daf(path).scalars_set())


# complete_chain: cycles refused before anything is written.


@pytest.mark.parametrize("suffix", FORMATS + GROUPS)
def test_a_data_set_is_not_its_own_base(tmp_path, suffix):
    path = f"{tmp_path}/self.{suffix}"
    daf = _base(path)
    with pytest.raises(pydaf.DafChainError, match=r"^cyclic chain") as raised:
        pydaf.complete_chain(base_daf=daf, new_daf=daf)
    assert str(raised.value).count(daf.complete_path()) >= 2  # both the base's and the new data set's path
    assert daf.scalars_set() == set()


@pytest.mark.parametrize(("suffix", "spelling"), [
    *((suffix, spelling) for suffix in FORMATS for spelling in ("symlink", "dot")),
    *((suffix, "hardlink") for suffix in ("h5df", "daf.zip", "daf.zarr.zip"))])  # (a directory has no hard link)
def test_the_new_data_set_by_another_path_is_not_its_base(tmp_path, suffix, spelling):
    path = f"{tmp_path}/self.{suffix}"
    daf = _base(path)
    other = f"{tmp_path}/other.{suffix}"
    if spelling == "symlink":
        os.symlink(path, other)
    elif spelling == "hardlink":
        os.link(path, other)
    else:
        other = f"{tmp_path}/./self.{suffix}"
    base = pydaf.open_daf(other)
    with pytest.raises(pydaf.DafChainError, match=r"^cyclic chain") as raised:
        pydaf.complete_chain(base_daf=base, new_daf=daf)
    message = str(raised.value)
    assert base.complete_path() in message and daf.complete_path() in message
    assert daf.scalars_set() == set()


@pytest.mark.parametrize("alias", ["hard", "soft", "slashes"])
def test_an_hdf5_group_by_another_link_is_not_its_own_base(tmp_path, alias):
    daf = _base(f"{tmp_path}/all.h5dfs#/cells")
    root = daf.format.root
    if alias == "hard":
        root.file["alias"] = root
    elif alias == "soft":
        root.file["alias"] = h5py.SoftLink("/cells")
    path = f"{tmp_path}/all.h5dfs#//cells" if alias == "slashes" else f"{tmp_path}/all.h5dfs#/alias"
    with pytest.raises(pydaf.DafChainError, match=r"^cyclic chain"):
        pydaf.complete_chain(base_daf=pydaf.open_daf(path), new_daf=daf)
    assert daf.scalars_set() == set()


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_base_built_on_the_new_data_set_is_refused(tmp_path, suffix):
    new = _base(f"{tmp_path}/new.{suffix}")
    middle = pydaf.open_daf(f"{tmp_path}/middle.{suffix}", "w")
    pydaf.complete_chain(base_daf=new, new_daf=middle)
    top = pydaf.open_daf(f"{tmp_path}/top.{suffix}", "w")
    pydaf.complete_chain(base_daf=middle, new_daf=top)
    # As a chain holding it, and by the records on disk only (the base opened alone), one and two steps away.
    for base in (pydaf.complete_daf(f"{tmp_path}/top.{suffix}"), pydaf.open_daf(f"{tmp_path}/middle.{suffix}"),
                 pydaf.open_daf(f"{tmp_path}/top.{suffix}")):
        with pytest.raises(pydaf.DafChainError, match=r"^cyclic chain") as raised:
            pydaf.complete_chain(base_daf=base, new_daf=new)
        assert new.complete_path() in str(raised.value) and base.complete_path() in str(raised.value)
    assert new.scalars_set() == set()


def test_complete_chain_refuses_a_base_already_as_deep_as_the_limit(tmp_path):
    leaf = _write_deep_chain(tmp_path, MAX_CHAIN_DEPTH)
    assert pydaf.complete_daf(leaf).axis_vector("cell").tolist() == ["A", "B"]  # (exactly at the limit: opens)
    new = pydaf.open_daf(f"{tmp_path}/new.daf", "w")
    with pytest.raises(pydaf.DafChainError, match=f"^too deep chain(.|\n)*MAX_CHAIN_DEPTH = {MAX_CHAIN_DEPTH}"):
        pydaf.complete_chain(base_daf=pydaf.open_daf(leaf), new_daf=new)
    assert new.scalars_set() == set()
    shallower = f"{tmp_path}/d{MAX_CHAIN_DEPTH - 2}.daf"
    pydaf.complete_chain(base_daf=pydaf.open_daf(shallower), new_daf=new)
    assert pydaf.complete_daf(f"{tmp_path}/new.daf").get_vector("cell", "age").tolist() == [1, 2]


# Bad records: typed errors naming the leaf and the base.


_REPOSITORIES = {
    "nul": "base\0.{suffix}",
    "huge": "x" * 10_000_000,
    "int": 5,
    "float": 1.5,
    "bool": True,
    "empty": "",
    "url": "https://example.com/base.{suffix}",
    "group-escape": "base.{suffix}#/../..",
}
_VIEWS = {
    "view-nul": '{"axes": [{"cell": "=\0"}]}',
    "view-nested": "[" * 100_000 + "]" * 100_000,
    "view-huge": json.dumps({"data": [{f"s{index}": "="} for index in range(1_000_000)]}),
    "view-int": 3,
}
_FINGERPRINTS = {
    "fingerprint-nested": '{"axes": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "fingerprint-huge": json.dumps({"base_daf_repository": "base", "axes": {f"a{i}": {} for i in range(1_000_000)}}),
    "fingerprint-float": 2.5,
}


def _plant(folder: str, suffix: str, records: dict) -> str | None:
    """A leaf at ``folder`` holding ``records`` (set once, as an append-only archive allows), its base beside it;
    ``None`` if the leaf's format can't hold such a record (then no chain can meet it)."""
    os.makedirs(folder)
    _base(f"{folder}/base.{suffix}")
    leaf = f"{folder}/leaf.{suffix}"
    daf = pydaf.open_daf(leaf, "w+")
    try:
        for name, value in records.items():
            daf.set_scalar(name, value)
    except pydaf.DafError:
        return None
    finally:
        daf.close()
    return leaf


def _message_names(report: dict, *paths: str) -> bool:
    return all(path in report["message"] for path in paths)


@pytest.mark.parametrize("suffix", FORMATS + GROUPS)
def test_bad_records_are_typed_errors_naming_the_leaf(tmp_path, suffix):
    leaves: list[tuple[str, str]] = []
    for label, value in _REPOSITORIES.items():
        value = value.format(suffix=suffix) if isinstance(value, str) and len(value) < 100 else value
        leaf = _plant(f"{tmp_path}/{label}", suffix, {"base_daf_repository": value})
        if leaf is not None:
            leaves.append((label, leaf))
    for label, value in {**_VIEWS, **_FINGERPRINTS}.items():
        scalar = "base_daf_view" if label.startswith("view") else "base_daf_fingerprint"
        leaf = _plant(f"{tmp_path}/{label}", suffix, {"base_daf_repository": f"base.{suffix}", scalar: value})
        if leaf is not None:
            leaves.append((label, leaf))
    assert len(leaves) >= 12
    started = time.monotonic()
    outcomes = _open_in_child(leaves)
    for label, leaf in leaves:
        report = outcomes[label]
        assert report["outcome"] == "typed", (label, report)
        assert report["class"] in ("DafFormatError", "DafChainError", "DafPathError", "DafNotDafError",
                                   "DafUnknownFormatError"), (label, report)
        assert leaf in report["message"], (label, report)  # the leaf holding the record
    assert "at most 4096" in outcomes["huge"]["message"]
    assert "a URL" in outcomes["url"]["message"]
    assert "nested too deeply" in outcomes["view-nested"]["message"]
    assert "at most 1048576" in outcomes["view-huge"]["message"]
    assert "nested too deeply" in outcomes["fingerprint-nested"]["message"]
    # (the ".." after "#" stays in the group: it never climbs out of the container to name another data set)
    assert f"{tmp_path}/group-escape/base.{suffix}#/../.." in outcomes["group-escape"]["message"]
    assert time.monotonic() - started < CHILD_TIMEOUT


def _replace_base(base: str, kind: str) -> None:
    (shutil.rmtree if os.path.isdir(base) else os.remove)(base)
    if kind == "directory":
        os.mkdir(base)
    elif kind == "fifo":
        os.mkfifo(base)
    elif kind == "text":
        with open(base, "w") as file:
            file.write("not a data set")
    elif kind == "other-format":  # another data set, of another format, at the recorded path
        other = f"{base}.other.h5df" if not base.endswith(".h5df") else f"{base}.other.daf"
        pydaf.open_daf(other, "w").add_axis("cell", ["X", "Y", "Z"]).close()
        os.rename(other, base)


@pytest.mark.parametrize("suffix", FORMATS + GROUPS)
def test_a_changed_base_is_a_typed_error_naming_both_files(tmp_path, suffix):
    leaves = []
    for kind in ("directory", "fifo", "text", "other-format", "missing"):
        folder = f"{tmp_path}/{kind}"
        os.makedirs(folder)
        base = _base(f"{folder}/base.{suffix}")
        leaf = pydaf.open_daf(f"{folder}/leaf.{suffix}", "w+")
        pydaf.complete_chain(base_daf=base, new_daf=leaf)
        leaf_path = leaf.complete_path()
        base.close()
        leaf.close()
        _replace_base(f"{folder}/base.{suffix}".partition("#")[0], kind)
        leaves.append((kind, leaf_path))
    outcomes = _open_in_child(leaves)
    for kind, leaf_path in leaves:
        report = outcomes[kind]
        assert report["outcome"] == "typed", (kind, report)
        base_path = f"{tmp_path}/{kind}/base.{suffix}".partition("#")[0]
        assert _message_names(report, leaf_path, base_path), (kind, report)
    assert outcomes["missing"]["class"] == "DafChainError" and "missing base daf data" in outcomes["missing"]["message"]
    assert outcomes["fifo"]["class"] == "DafChainError" and "a FIFO" in outcomes["fifo"]["message"]


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_leaf_recording_itself_by_another_path_is_a_cycle(tmp_path, suffix):
    leaves = []
    for spelling, record in (("self", f"leaf.{suffix}"), ("dot", f"./leaf.{suffix}"), ("link", f"link.{suffix}")):
        folder = f"{tmp_path}/{spelling}"
        os.makedirs(folder)
        leaf = pydaf.open_daf(f"{folder}/leaf.{suffix}", "w+").add_axis("cell", ["A"])
        leaf.set_scalar("base_daf_repository", record)
        leaf.close()
        os.symlink(f"{folder}/leaf.{suffix}", f"{folder}/link.{suffix}")
        leaves.append((spelling, f"{folder}/leaf.{suffix}"))
    outcomes = _open_in_child(leaves)
    for spelling, leaf in leaves:
        report = outcomes[spelling]
        assert report["class"] == "DafChainError", (spelling, report)
        assert report["message"].startswith("cyclic base_daf_repository") and leaf in report["message"], report


# Depth: bounded, named, never a RecursionError or a run without end.


def _write_deep_chain(folder: Path, depth: int, view: str | None = None) -> str:
    """A chain of ``depth`` FilesDaf data sets (``d0`` the root), each recording the previous one, built by writing
    the record files directly; with ``view``, each also records that ``base_daf_view``."""
    root = f"{folder}/d0.daf"
    _base(root).close()
    scalars = f"{root}/scalars"
    for level in range(1, depth):
        path = f"{folder}/d{level}.daf"
        shutil.copytree(root, path)
        with open(f"{path}/scalars/base_daf_repository.json", "w") as file:
            json.dump({"type": "String", "value": f"d{level - 1}.daf"}, file)
        if view is not None:
            with open(f"{path}/scalars/base_daf_view.json", "w") as file:
                json.dump({"type": "String", "value": view}, file)
    assert os.listdir(scalars) == []
    return f"{folder}/d{depth - 1}.daf"


def test_a_very_deep_chain_is_refused_with_its_depth_and_limit(tmp_path):
    leaf = _write_deep_chain(tmp_path, round(soak(1000, 200)))
    report = _open_in_child([("deep", leaf)])["deep"]
    assert report["class"] == "DafChainError", report
    assert report["message"].startswith("too deep chain") and leaf in report["message"], report
    assert f"MAX_CHAIN_DEPTH = {MAX_CHAIN_DEPTH}" in report["message"], report


def test_a_deep_chain_of_views_is_refused_and_a_shallower_one_opens_quickly(tmp_path):
    masked = json.dumps({"axes": [{"cell": "@ cell [ age > 0 ]"}], "data": [{"*": "="}, {'("cell", "age")': "="}]})
    os.makedirs(f"{tmp_path}/deep")
    os.makedirs(f"{tmp_path}/shallow")
    deep = _write_deep_chain(tmp_path / "deep", MAX_VIEW_NESTING + 8, masked)
    shallow = _write_deep_chain(tmp_path / "shallow", MAX_VIEW_NESTING + 1, masked)  # (as many views as allowed)
    outcomes = _open_in_child([("deep", deep), ("shallow", shallow)], timeout=90)
    assert outcomes["shallow"]["outcome"] == "ok", outcomes["shallow"]
    report = outcomes["deep"]
    assert report["class"] == "DafChainError" and report["message"].startswith("too deep chain"), report
    assert f"MAX_VIEW_NESTING = {MAX_VIEW_NESTING}" in report["message"], report
    assert "RecursionError" not in report["message"]


_NESTED_VIEWS = r"""
import sys
import pydaf
limit = int(sys.argv[1])
daf = pydaf.MemoryDaf(name="nested!").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
view = daf
for level in range(limit):
    view = pydaf.viewer(view, axes=[("cell", "@ cell [ age > 0 ]")], data=[(("cell", "age"), "=")],
                        name=f"level{level}")
print(view.get_vector("cell", "age").tolist(), flush=True)
try:
    pydaf.viewer(pydaf.chain_reader([pydaf.MemoryDaf(), view]), data=[(("cell", "age"), "=")])
    print("made")
except pydaf.DafError as error:
    print(type(error).__name__, str(error).replace("\n", " / "))
"""


def test_views_nested_in_memory_are_bounded():
    # (in a child: before, reading through nested masked views took time exponential in their number, ~1.7x a view)
    try:
        done = subprocess.run([sys.executable, "-c", _NESTED_VIEWS, str(MAX_VIEW_NESTING)], capture_output=True,
                              text=True, timeout=60, env=_child_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading through {MAX_VIEW_NESTING} nested views did not end within 60 s")
    assert done.returncode == 0, done.stderr[-3000:]
    values, outcome = done.stdout.splitlines()
    assert values == "[1, 2]"
    assert outcome.startswith(f"DafValueError too deeply nested view: {MAX_VIEW_NESTING + 1} views"), outcome
    assert f"MAX_VIEW_NESTING = {MAX_VIEW_NESTING}" in outcome, outcome


def test_a_leaf_path_holding_a_nul_is_a_typed_error(tmp_path):
    with pytest.raises(pydaf.DafPathError, match="NUL character"):
        pydaf.complete_daf(f"{tmp_path}/leaf\0.daf")
