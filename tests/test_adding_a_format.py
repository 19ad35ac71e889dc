"""docs/adding-a-format.md runs as written: its ```python blocks, in order, as one module (the toy format, its
registration, the usage example with its asserts), and the conformance suite the page subclasses, collected here.

The page's format is registered only while a test of this module runs, so that the rest of the suite (which lists
the registered formats) never sees it."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydaf.formats.registry import register_format, registered_formats, unregister_format

PAGE = Path(__file__).resolve().parent.parent / "docs" / "adding-a-format.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _run_page() -> types.ModuleType:
    """The page's python blocks run as one module (registered in ``sys.modules``, as an imported module is)."""
    module = types.ModuleType("adding_a_format_page")
    module.__file__ = str(PAGE)
    sys.modules[module.__name__] = module
    try:
        for index, block in enumerate(_BLOCK.findall(PAGE.read_text())):
            exec(compile(block, f"{PAGE}:block{index}", "exec"), module.__dict__)
    finally:
        if "FORMAT" in module.__dict__:
            unregister_format(module.FORMAT.name)
    return module


PAGE_MODULE = _run_page()
TestKeyValueDaf = PAGE_MODULE.TestKeyValueDaf  # the page's conformance suite, collected by pytest here


@pytest.fixture(autouse=True)
def _page_format_registered() -> Iterator[None]:
    register_format(PAGE_MODULE.FORMAT)
    try:
        yield
    finally:
        unregister_format(PAGE_MODULE.FORMAT.name)


def test_the_page_has_its_blocks() -> None:
    blocks = _BLOCK.findall(PAGE.read_text())
    assert len(blocks) == 4
    assert "class KeyValueFormat(FormatWriter)" in blocks[0] and "register_format(FormatEntry(" in blocks[1]


def test_the_format_is_registered_only_during_these_tests() -> None:
    assert "KeyValueDaf" in [entry.name for entry in registered_formats()]


def test_the_format_implements_every_abstract_method() -> None:
    assert not PAGE_MODULE.KeyValueFormat.__abstractmethods__


def test_the_usage_example_stored_both_layouts() -> None:
    store = PAGE_MODULE.STORES["example"]
    assert store["vectors/cell/age"].tolist() == [3, 5, 8]
    assert store["matrices/gene/cell/UMIs"].tolist() == [[0, 2, 4], [1, 0, 5]]
