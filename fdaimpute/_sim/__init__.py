"""The processes behind :mod:`fdaimpute.simulate`: designs and the truths drawn."""
