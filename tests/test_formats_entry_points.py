"""Third-party formats register through the ``pydaf.formats`` entry point group: the loader, fed real
``importlib.metadata.EntryPoint`` objects naming a real module."""

from __future__ import annotations

import os
import sys
from importlib.metadata import EntryPoint

import pytest

import pydaf
from pydaf.formats import registry

PLUGIN = """
from pydaf.formats.registry import FormatEntry
from pydaf.formats.memory import MemoryDaf

def guess(path):
    return path.endswith(".plugin-daf")

def open_plugin(path, mode="r", *, name=None):
    return MemoryDaf(name=name or path)

FORMAT = FormatEntry("PluginDaf", "a path ending with .plugin-daf", guess_can_open=guess, open=open_plugin)
NOT_A_FORMAT = 7
"""


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "pydaf_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "pydaf_test_plugin"
    sys.modules.pop("pydaf_test_plugin", None)
    if "PluginDaf" in {entry.name for entry in registry._ordered()}:
        registry.unregister_format("PluginDaf")


def test_an_entry_point_registers_its_format_and_open_daf_uses_it(plugin_module, tmp_path):
    point = EntryPoint("plugin", f"{plugin_module}:FORMAT", registry.ENTRY_POINT_GROUP)
    assert [entry.name for entry in registry.load_entry_point_formats([point])] == ["PluginDaf"]
    names = [entry.name for entry in registry.registered_formats()]
    assert names.index("PluginDaf") > names.index("ZipDaf") and names[-1] == "FilesDaf"
    daf = pydaf.open_daf(os.path.join(tmp_path, "x.plugin-daf"), "r+", name="mine")
    assert type(daf).__name__ == "MemoryDaf" and daf.name == "mine"


def test_an_entry_point_that_is_not_a_format_entry_is_refused(plugin_module):
    point = EntryPoint("bad", f"{plugin_module}:NOT_A_FORMAT", registry.ENTRY_POINT_GROUP)
    expected = r"bad = pydaf_test_plugin:NOT_A_FORMAT\nof the group: pydaf\.formats"
    with pytest.raises(pydaf.DafValueError, match=expected):
        registry.load_entry_point_formats([point])


def test_an_entry_point_never_replaces_a_registered_format(plugin_module):
    point = EntryPoint("h5", "pydaf.formats.h5df:FORMAT", registry.ENTRY_POINT_GROUP)
    before = registry.guess_format("x.h5df")
    with pytest.warns(UserWarning, match="H5df of the entry point h5 is already registered"):
        assert registry.load_entry_point_formats([point]) == []
    assert registry.guess_format("x.h5df") is before


def test_the_built_in_order_is_declared_not_imported():
    assert [(entry.name, entry.priority) for entry in registry.registered_formats()][:5] == [
        ("HttpDaf", 0), ("H5df", 10), ("ZarrDaf", 20), ("ZipDaf", 30), ("FilesDaf", 40)]
