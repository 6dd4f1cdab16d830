"""Shared internals of the torch imputers (VT, SAND, CNP; GAIN uses the settings).

The base class with its fit template and statistical base, presets and
parameter constraints, cross-fitting, weights on disk and shared docs.
"""
