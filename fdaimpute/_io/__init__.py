"""Files: reading options, writers, atomic writes and the model tree.

Beside :mod:`fdaimpute._core` in the lowest layer: CSV and Parquet, safe
writes of outputs and models, and the JSON tree a model file holds. It knows
formats, not statistics.
"""
