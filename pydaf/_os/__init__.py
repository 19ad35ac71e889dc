"""Operating-system plumbing, below everything that stores data: :mod:`.maps` (file maps, their pages, file
identity, state shared per file), :mod:`.files` (opening files a data set does not own, never blocking),
:mod:`.exchange` (an atomic swap of two paths), :mod:`.locks` (locks between processes, the registry of open files,
fork safety), :mod:`.byte_sources` (random access to the bytes of a file, local or remote: what packed shards are read
through) and :mod:`.write_errors`. It imports nothing from the data set layers."""
