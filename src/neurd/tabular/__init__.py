"""Exact tabular computation on a compiled game, in JAX (float64).

* :mod:`~neurd.tabular.sequence_form`: the layout and its two sweeps
  (realization plans top-down, counterfactual values bottom-up);
* :mod:`~neurd.tabular.evaluation`: expected values, best responses, NashConv;
* :mod:`~neurd.tabular.cfr`: CFR with a pluggable local learner (regret
  matching, NeuRD, SPG), alternating updates, the sequence-probability
  average policy and the vmapped step-size sweep of Figure 4b;
* :mod:`~neurd.tabular.solvers`: OpenSpiel's CFR and CFR+ (``CFRSolver``,
  ``CFRPlusSolver``) computed operation for operation, Figure 4b's yardsticks;
* :mod:`~neurd.tabular.policies`: policy arrays, checks and OpenSpiel conversion;
* :mod:`~neurd.tabular.reference`: OpenSpiel's own CFR and CFR+ solvers, which
  check the yardsticks, and oracles for the tests.
"""
