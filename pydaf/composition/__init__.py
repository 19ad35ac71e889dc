"""Composition of data sets: chains (and, later, views, copies and concatenation)."""
