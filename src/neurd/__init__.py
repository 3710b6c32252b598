"""neurd: a reproduction of Neural Replicator Dynamics (Hennes et al., AAMAS 2020).

Importing the package changes no global setting.  The tabular, matrix and RPS
work runs in float64 inside its own entry points (:mod:`neurd.precision`);
neural code runs in JAX's default float32.
"""

import importlib.metadata as _metadata

try:  # the installed distribution's version (pyproject.toml): what provenance records
    __version__ = _metadata.version(__name__)
except _metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"
