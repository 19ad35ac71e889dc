"""Operating-system plumbing, below everything that stores data: :mod:`.maps` (file maps, their pages, file
identity, state shared per file), :mod:`.files` (opening files a data set does not own, never blocking),
:mod:`.exchange` (an atomic swap of two paths), :mod:`.locks` (locks between processes, the registry of open files,
fork safety) and :mod:`.write_errors`. It imports nothing from the data set layers."""
