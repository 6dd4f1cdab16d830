"""The command line's parts: parameters, models on disk, output files, clusters.

The top layer: it may import everything; nothing imports it but
:mod:`fdaimpute.cli`.
"""
