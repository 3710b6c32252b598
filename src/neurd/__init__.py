"""neurd: a reproduction of Neural Replicator Dynamics (Hennes et al., AAMAS 2020).

Importing the package switches JAX to float64: every tabular result in this
project is computed in double precision, and exact comparisons with OpenSpiel
(to 1e-12) depend on it.
"""

import jax

jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"
