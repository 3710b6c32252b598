"""Neural NeuRD and SPG (paper Section 5, Fig 6, Algorithm 1), on the compiled game.

* :func:`compare` (:mod:`~neurd.neural.comparison`): NeuRD vs SPG on any game in one
  call with defaults, returning the tables the pipeline writes (``docs/neural.md``);
* :mod:`~neurd.neural.experiment`: one job of Fig 6 (:class:`~neurd.neural.experiment.Plan`,
  :func:`~neurd.neural.experiment.run`): checkpoints, exact NashConv, saved state;
* :mod:`~neurd.neural.networks`: the policy and critic MLPs (flax);
* :mod:`~neurd.neural.sampler`: whole episodes sampled on the compiled game's
  history arrays, with the entropy-regularised returns;
* :mod:`~neurd.neural.losses`: the all-actions NeuRD and SPG policy losses (one
  line apart), NeuRD's logit threshold, the critic's regression loss;
* :mod:`~neurd.neural.train`: the learning loop of every (algorithm, entropy
  level, seed) configuration of a game as one jitted program, in float32, with
  the exact NashConv of the current network policy at checkpoints (float64).
"""

_COMPARISON = ("compare", "Comparison", "DEFAULTS")
__all__ = list(_COMPARISON)


def __getattr__(name):
    # imported on first use: `import neurd.neural.train` does not import pandas
    if name in _COMPARISON:
        from neurd.neural import comparison

        return getattr(comparison, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
