"""Neural NeuRD and SPG (paper Section 5, Fig 6, Algorithm 1), on the compiled game.

* :mod:`~neurd.neural.experiment`: one job of Fig 6 run top to bottom
  (:func:`~neurd.neural.experiment.run`);
* :mod:`~neurd.neural.plan`: what a job runs (:class:`~neurd.neural.plan.Plan`) and its
  checkpoint grid;
* :mod:`~neurd.neural.measurement`: the exact float64 NashConv, critic error, entropy and
  threshold share of the networks' policies at a checkpoint;
* :mod:`~neurd.neural.checkpoint`: a job's saved state, a folder of ``.npz`` parts;
* :mod:`~neurd.neural.device`: the device a job computes on, for its provenance;
* :mod:`~neurd.neural.networks`: the policy and critic MLPs (flax);
* :mod:`~neurd.neural.sampler`: whole episodes sampled on the compiled game's
  history arrays, with the entropy-regularised returns;
* :mod:`~neurd.neural.losses`: the all-actions NeuRD and SPG policy losses (one
  line apart), NeuRD's logit threshold, the critic's regression loss;
* :mod:`~neurd.neural.train`: the learning loop of every (algorithm, entropy
  level, seed) configuration of a game as one jitted program, in float32, with
  the exact NashConv of the current network policy at checkpoints (float64);
* :mod:`~neurd.neural.runs`: which runs a config makes (configurations, critics, seed
  chunks and blocks); :mod:`~neurd.neural.results`: the tables of those runs, their
  checks and what is derived from them (summary, CI), for the stage and the publication.

NeuRD vs SPG on any game in one call, with the pipeline's defaults and tables, is
:func:`neurd.comparison.compare` (``docs/neural.md``).
"""
