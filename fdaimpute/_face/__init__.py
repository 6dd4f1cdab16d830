"""FACE's numerical core on arrays: splines, pair moments, penalised fits, the model."""
