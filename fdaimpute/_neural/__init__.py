"""Internals of :mod:`fdaimpute.neural`: the shared base class, presets, docs."""
