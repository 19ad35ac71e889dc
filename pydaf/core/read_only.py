"""Read-only wrappers (Julia's ``ReadOnly``): the same data set, with no write methods."""

from __future__ import annotations

from .readers import DafReader


class DafReadOnly(DafReader):
    """A read-only view of a data set. It shares the wrapped data set's storage, lock, cache and version counters, so
    it sees every change made through the writer.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="example!").add_axis("cell", ["A"])
        >>> view = daf.read_only()
        >>> hasattr(view, "set_scalar"), view.axis_length("cell")
        (False, 1)
    """

    def __init__(self, daf: DafReader, *, name: str | None = None) -> None:
        self._base = daf
        super().__init__(daf.format, name=name or f"{daf.name}.read_only", state=daf._state)

    @property
    def base(self) -> DafReader:
        """The wrapped data set."""
        return self._base

    def _type_text(self) -> str:
        return f"ReadOnly {self._base._type_text()}"

    def __repr__(self) -> str:
        return f"ReadOnly {self._base!r}"

    def _description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: ReadOnly")
        if not deep:
            lines.append(f"{indent}base: {self._base!r}")

    def _description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool, tensors: bool) -> None:
        if deep:
            lines.append(f"{indent}base:")
            self._base._describe(f"{indent}  ", lines, cache=cache, deep=deep, tensors=tensors)


def read_only(daf: DafReader, *, name: str | None = None) -> DafReader:
    """A read-only view of a data set (the data set itself when it is already read-only and no name is given).

    Example:
        >>> import pydaf
        >>> pydaf.read_only(pydaf.MemoryDaf(name="x!")).name
        'x!.read_only'
    """
    return daf.read_only(name=name)
