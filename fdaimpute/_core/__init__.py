"""The lowest layer: subjects, ids and parameters, with no statistics.

Coercion of user input into subjects (ids, flat arrays, frames), the checks
and error messages every imputer shares, the steps every fit shares, queries
of fitted curves at new times, output frames, declared parameter
constraints, the plausibility rule and the phase timer. Imports nothing of
fdaimpute but itself and the data types (:mod:`fdaimpute.data`,
:mod:`fdaimpute.multivariate`).
"""
