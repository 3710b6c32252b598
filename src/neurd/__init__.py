"""neurd: a reproduction of Neural Replicator Dynamics (Hennes et al., AAMAS 2020).

Importing the package changes no global setting.  The tabular, matrix and RPS
work runs in float64 inside its own entry points (:mod:`neurd.precision`);
neural code runs in JAX's default float32.
"""

__version__ = "0.1.0"
