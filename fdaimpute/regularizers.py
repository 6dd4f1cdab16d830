"""Loss penalties for the neural imputers (re-exported from :mod:`fdaimpute.nn`).

Importing this module imports torch.
"""

from fdaimpute.nn.regularizers import *  # noqa: F403
from fdaimpute.nn.regularizers import __all__  # noqa: F401
