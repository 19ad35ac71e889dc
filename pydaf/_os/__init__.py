"""Operating-system plumbing, below everything that stores data: :mod:`.maps` (file maps, their pages, file
identity, state shared per file). It imports nothing from the data set layers."""
