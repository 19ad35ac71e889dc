"""The implementations of the query phrases, by family; :mod:`pydaf.queries.machine` lists them in Julia's order.

Each implementation is called with the query state, the stack elements the phrase matched (popped) and the operations
it matched (``None`` for an optional one that is absent), and pushes what the phrase declares it leaves on the stack.

- :mod:`.common`: looking up a property of a vector's entries (a vector, or a column or row of a matrix: a
  :class:`~.common.MatrixSlice`), pending ``??`` values, comparisons, grouping helpers;
- :mod:`.names_scalars`: sets of names and scalar results;
- :mod:`.vectors`, :mod:`.masks`, :mod:`.groups` (grouping and counting), :mod:`.matrices`.
"""
