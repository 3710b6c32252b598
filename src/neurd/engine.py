"""The exact game engine in a few calls: compile a game, evaluate, best-respond, run CFR.

::

    from neurd import engine

    game = engine.compile_game("leduc_poker")        # or engine.load_game(path)
    policy = engine.uniform_policy(game)              # [I, A] over both players
    engine.nash_conv(game, policy)                    # exact, float64
    state = engine.cfr(game, "neurd", step_size=1.0, iterations=1000)
    engine.nash_conv(game, engine.average_policy(game, state))

Every function takes the game as a :class:`CompiledGame` (the arrays of
:mod:`neurd.games`) or its :class:`SequenceForm` (the JAX layout of
:mod:`neurd.tabular.sequence_form`; built once per game and cached).
Policies are ``[I, A]`` arrays over the information states of both players
in the compiled order (``game.infostate_string`` names them), zero at
illegal actions; the evaluation functions also take a batch ``[N, I, A]``.
Inputs are checked before any computation and refused with a message that
names the bad value.  Every function computes in float64 whatever the
caller's JAX setting (:mod:`neurd.precision`); policies and values come back
as NumPy float64 arrays, CFR states as JAX pytrees for the functions here.
:data:`GAMES` are the paper's three games (short name -> OpenSpiel string and
information-state count).  See ``docs/engine.md`` for a worked example.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from neurd.config import ConfigError
from neurd.games import DEFAULT_MAX_HISTORIES, CompiledGame, GameError, GameFileError
from neurd.games import compile_game as _compile_game
from neurd.games import load as _load
from neurd.games import save as _save
from neurd.machine import available_memory_bytes
from neurd.names import GAMES, NEURD
from neurd.precision import float64
from neurd.schema import check_section
from neurd.tabular import cfr as _cfr
from neurd.tabular import evaluation as _evaluation
from neurd.tabular.cfr import CFRState, LocalLearner
from neurd.tabular.contract import LearnerError, check_learner, check_run
from neurd.tabular.policies import check_policy, from_openspiel, to_openspiel
from neurd.tabular.policies import random_policies as _random_policies
from neurd.tabular.sequence_form import SequenceForm
from neurd.tabular.sequence_form import sequence_form as _sequence_form

Game = CompiledGame | SequenceForm

__all__ = [
    "GAMES", "CFRState", "CompiledGame", "GameError", "GameFileError", "LearnerError",
    "LocalLearner",
    "SequenceForm", "average_policy", "best_response", "best_response_values", "cfr",
    "cfr_regret", "cfr_sweep", "check_policy", "compile_game", "current_policy",
    "expected_values", "from_openspiel", "load_game", "nash_conv", "random_policies",
    "save_game", "sequence_form", "to_openspiel", "uniform_policy",
]


def compile_game(game, path=None, max_histories: int = DEFAULT_MAX_HISTORIES) -> CompiledGame:
    """Walk an OpenSpiel game once into arrays; save to ``path`` if given.

    ``game``: a game string (``"leduc_poker"``) or a loaded ``pyspiel.Game``.
    Two-player zero-sum games with perfect recall only (simultaneous-move games
    are made turn-based); others raise :class:`GameError` with the reason.
    ``max_histories`` caps the tree walk (default 2,000,000 histories).
    """
    _check("compile_game", "max_histories", "config", {"limits": {"max_histories": max_histories}})
    game = _compile_game(game, max_histories=max_histories)
    if path is not None:
        _save(game, path)
    return game


def load_game(path) -> CompiledGame:
    """Read a compiled game (``.npz``); a foreign or stale file raises :class:`GameFileError`."""
    return _load(path)


def save_game(game: CompiledGame, path) -> None:
    """Write a compiled game to ``path`` (``.npz``, no pickles), atomically."""
    _save(game, path)


def _exact(function):
    """In float64; results as NumPy float64 arrays (JAX arrays only while being traced).

    NumPy results keep the caller free of JAX's precision setting: a float64
    JAX array used in arithmetic outside double precision would be truncated.
    """
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with float64():
            result = function(*args, **kwargs)
        return result if isinstance(result, jax.core.Tracer) else np.asarray(result)

    return wrapper


@functools.lru_cache(maxsize=16)
def _cached_form(game: CompiledGame) -> SequenceForm:
    return _sequence_form(game)


@float64
def sequence_form(game: Game) -> SequenceForm:
    """The JAX layout of ``game`` (built once per compiled game, then cached)."""
    if isinstance(game, SequenceForm):
        return game
    if not isinstance(game, CompiledGame):
        raise TypeError(f"expected a CompiledGame or SequenceForm, got {type(game).__name__}")
    return _cached_form(game)


def _policy(game: Game, policy) -> jax.Array:
    """Checked policy as a float64 JAX array (values checked unless traced)."""
    if isinstance(policy, jax.core.Tracer):
        return policy
    return jnp.asarray(check_policy(game, policy), dtype=jnp.float64)


def _batched(function, game: Game, policy):
    form, policy = sequence_form(game), _policy(game, policy)
    if policy.ndim == 3:
        return _batched_jit(function, form, policy)
    return _single_jit(function, form, policy)


@functools.partial(jax.jit, static_argnums=0)
def _single_jit(function, form, policy):
    return function(form, policy)


@functools.partial(jax.jit, static_argnums=0)
def _batched_jit(function, form, policies):
    return jax.vmap(function, in_axes=(None, 0))(form, policies)


@_exact
def uniform_policy(game: Game) -> np.ndarray:
    """``[I, A]``: uniform over the legal actions at every information state."""
    return _evaluation.uniform_policy(sequence_form(game))


def random_policies(game: CompiledGame, num: int, seed: int) -> np.ndarray:
    """``[num, I, A]`` policies drawn uniformly from each information state's simplex
    (Dirichlet(1, ..., 1)) with ``numpy.random.default_rng(seed)``; ``seed`` as config key
    ``seed``."""
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or not 0 <= num <= 10**6:
        raise ValueError(f"engine.random_policies: argument num must be an integer in "
                         f"[0, 1000000], got {num!r}")
    _check("random_policies", "seed", "config", {"seed": seed})
    if not isinstance(game, CompiledGame):
        raise TypeError(f"expected a CompiledGame, got {type(game).__name__}")
    return _random_policies(game, int(num), int(seed))


@_exact
def expected_values(game: Game, policy) -> np.ndarray:
    """``[2]`` (or ``[N, 2]``): expected return of each player under ``policy``."""
    return _batched(_evaluation.expected_values, game, policy)


@_exact
def best_response_values(game: Game, policy) -> np.ndarray:
    """``[2]`` (or ``[N, 2]``): each player's best-response value against ``policy``."""
    return _batched(_evaluation.best_response_values, game, policy)


@_exact
def nash_conv(game: Game, policy) -> np.ndarray:
    """NashConv (paper, eq. nashconv): summed best-response gains; ``[]`` or ``[N]``.

    Equals ``pyspiel.nash_conv`` to ~1e-15 (tested to 1e-10).
    """
    return _batched(_evaluation.nash_conv, game, policy)


@_exact
def best_response(game: Game, policy, player: int) -> np.ndarray:
    """``[I_player, A]`` one-hot best response of ``player`` (0 or 1) to ``policy``.

    Rows are ``player``'s information states in the compiled order (player 0's
    are rows ``0 .. I_0 - 1`` of a policy, player 1's the rest).
    """
    if player not in (0, 1):
        raise ValueError(f"player must be 0 or 1, got {player!r}")
    form = sequence_form(game)
    return _best_response_jit(form, _policy(game, policy), player)


@functools.partial(jax.jit, static_argnums=2)
def _best_response_jit(form, policy, player):
    return _evaluation.best_response(form, policy, player)


# engine.cfr's runs longer than this many iterations are timed on a short run first
PACE_ITERATIONS = 20


def _check_pace(function: str, form: SequenceForm, learner: LocalLearner, step_size,
                iterations: int, max_hours) -> None:
    """Refuse a run whose time, from :data:`PACE_ITERATIONS` iterations timed here (the
    program is compiled once for both), passes ``max_hours``; naming the estimate."""
    if max_hours is not None and not (isinstance(max_hours, (int, float))
                                      and not isinstance(max_hours, bool)
                                      and 0 < max_hours < float("inf")):
        raise ValueError(f"engine.{function}: argument max_hours must be a positive number of "
                         f"hours or None, got {max_hours!r}")
    if max_hours is None or iterations <= 50 * PACE_ITERATIONS:
        return
    jax.block_until_ready(_cfr.run(form, learner, step_size, 2).iteration)  # compiles
    start = time.perf_counter()
    jax.block_until_ready(_cfr.run(form, learner, step_size, PACE_ITERATIONS).iteration)
    hours = (time.perf_counter() - start) / PACE_ITERATIONS * iterations / 3600.0
    if hours > max_hours:
        raise ValueError(f"engine.{function}: the run would take about {hours:.1f} hours "
                         f"({iterations:,} iterations at the pace of {PACE_ITERATIONS} timed "
                         f"here), more than max_hours = {max_hours}; pass a larger max_hours "
                         "(or None) to run it anyway")


# a run's CFR state and its temporaries, counted as this many float64 arrays over the
# (information state, action) pairs and the terminal histories per run: the state's four
# (parameters, policy, realization plan, cumulative policy), as many again for the loop's
# carry and an iteration's values and regrets
RUN_ARRAYS = 8
# the share of the machine's available memory a run may plan to hold
MEMORY_SHARE = 0.8


def run_memory_bytes(form: SequenceForm, runs: int = 1) -> int:
    """Bytes ``runs`` CFR runs of ``form`` at once (vmapped) are estimated to hold: the game's
    arrays, and per run :data:`RUN_ARRAYS` float64 arrays over the information states'
    actions and the terminal histories."""
    game = sum(int(np.asarray(leaf).nbytes) for leaf in jax.tree_util.tree_leaves(form))
    per_run = 8 * RUN_ARRAYS * (int(form.num_infostates) * int(form.num_actions)
                                + int(np.shape(form.terminal_payoff)[0]))
    return game + runs * per_run


def _check_memory(function: str, form: SequenceForm, runs: int, lower: str) -> None:
    """Refuse, before anything is allocated, ``runs`` runs whose estimated memory
    (:func:`run_memory_bytes`) passes :data:`MEMORY_SHARE` of what the machine has available."""
    available = available_memory_bytes()
    need = run_memory_bytes(form, runs)
    if available is not None and need > MEMORY_SHARE * available:
        raise ValueError(f"engine.{function}: {runs} run(s) of this game "
                         f"({form.num_infostates:,} information states x {form.num_actions} "
                         f"actions, {int(np.shape(form.terminal_payoff)[0]):,} terminal "
                         f"histories) would hold about {need / 2**20:,.0f} MB, more than "
                         f"{MEMORY_SHARE:.0%} of the {available / 2**20:,.0f} MB this machine "
                         f"has available; {lower}")


def _checked_run(name: str, game: Game, learner, step_size, iterations: int):
    """``(sequence form, local learner)`` of a CFR run of :func:`cfr` or :func:`cfr_regret`
    (``name``), its arguments checked first as the config's keys are, a learner of the
    user's on the game, and its memory against the machine's."""
    form = sequence_form(game)
    chosen = _cfr.local_learner(learner)
    _check_iterations(name, iterations)
    _check_step_size(name, form, step_size)
    if chosen is not _cfr.LEARNERS.get(chosen.name):
        check_learner(name, form, chosen)
    _check_memory(name, form, 1, "free memory, or use a smaller game")
    return form, chosen


@float64
def cfr(game: Game, learner: str | LocalLearner = NEURD, step_size=1.0,
        iterations: int = 1000, max_hours: float | None = 2.0) -> CFRState:
    """Run CFR with a local learner for ``iterations`` alternating iterations.

    ``learner``: ``"neurd"`` (logits ``+= eta * counterfactual regret``; =
    CFR(Hedge)), ``"spg"`` (``+= eta * pi * counterfactual regret``), ``"rm"``
    (regret matching: OpenSpiel's ``CFRSolver``), or a :class:`LocalLearner`.
    ``step_size``: a positive number, or ``[I, 1]`` per information state.
    ``iterations`` and ``step_size`` are checked as config keys ``tabular.iterations`` and
    ``tabular.step_sizes`` are (:mod:`neurd.schema`; at least 2 iterations, step sizes at
    most 1000), before anything runs.
    ``max_hours``: the longest the run may take (None: no bound); a run of more than a
    thousand iterations is timed on :data:`PACE_ITERATIONS` first and refused, with the
    estimate, where it would take longer; a run whose memory (:func:`run_memory_bytes`)
    passes 80% of what the machine has available is refused before anything is allocated.
    Read the result with :func:`average_policy` / :func:`current_policy`.
    """
    form, chosen = _checked_run("cfr", game, learner, step_size, iterations)
    _check_pace("cfr", form, chosen, step_size, iterations, max_hours)
    return check_run("cfr", chosen, _cfr.run(form, chosen, step_size, iterations), iterations,
                     lambda k: _cfr.run(form, chosen, step_size, k))


@float64
def cfr_regret(game: Game, learner: str | LocalLearner = NEURD, step_size=1.0,
               iterations: int = 1000) -> tuple[CFRState, jax.Array]:
    """As :func:`cfr`, and ``[2]`` each player's external regret ``R_{i,T}``.

    ``R_{i,T}``: what the best fixed policy in hindsight would have gained over
    the policies played, against the opponent policies each update saw
    (paper, Corollary after Statement 1).
    """
    form, chosen = _checked_run("cfr_regret", game, learner, step_size, iterations)
    state, regret = _cfr.run_with_regret(form, chosen, step_size, iterations)
    check_run("cfr_regret", chosen, state, iterations,
              lambda k: _cfr.run(form, chosen, step_size, k))
    return state, regret


@float64
def cfr_sweep(game: Game, learners: Sequence[str | LocalLearner], step_sizes,
              checkpoints: Sequence[int]) -> np.ndarray:
    """NashConv of the average policy, ``[learners, step sizes, checkpoints]``.

    Every (learner, step size) run at once: one jitted program, ``vmap`` over
    the step sizes, NashConv evaluated exactly at each checkpoint iteration.
    """
    form = sequence_form(game)
    if isinstance(learners, str):
        raise ValueError(f"engine.cfr_sweep: argument learners must be a list of learners, got "
                         f"{learners!r}")
    for learner in learners:
        _cfr.local_learner(learner)
    _check("cfr_sweep", "step_sizes", "tabular", {"step_sizes": step_sizes})
    last = _cfr.checkpoint_segments(checkpoints).sum()
    _check("cfr_sweep", "checkpoints", "tabular", {"iterations": int(last)})
    _check_memory("cfr_sweep", form, len(learners) * int(np.size(step_sizes)),
                  "pass fewer step sizes (or learners) per call")
    return _cfr.cfr_sweep(form, learners, step_sizes, checkpoints)


@_exact
def average_policy(game: Game, state: CFRState) -> np.ndarray:
    """``[I, A]``: CFR's sequence-probability average policy (the one that converges);
    ``state`` must be a run of ``game`` (its players' information states and actions)."""
    form = sequence_form(game)
    _check_state("average_policy", form, state)
    return _cfr.average_policy(form, state)


@_exact
def current_policy(state: CFRState) -> np.ndarray:
    """``[I, A]``: the policy of CFR's last iteration."""
    if not isinstance(state, CFRState):
        raise TypeError(f"engine.current_policy: argument state must be a CFRState (what "
                        f"engine.cfr returns), got {type(state).__name__}")
    return _cfr.current_policy(state)


def _check_state(function: str, form: SequenceForm, state) -> None:
    """``state`` a CFR state of the game of ``form``: each player's arrays of its shape."""
    if not isinstance(state, CFRState):
        raise TypeError(f"engine.{function}: argument state must be a CFRState (what "
                        f"engine.cfr returns), got {type(state).__name__}")
    for player, tree in enumerate(form.players):
        have = tuple(np.shape(state.cumulative_policy[player]))
        want = tuple(tree.legal.shape)
        if have != want:
            raise ValueError(f"engine.{function}: argument state is not a run of this game: "
                             f"its player {player} has {have[0]} information states x "
                             f"{have[1] if len(have) > 1 else '?'} actions, the game's "
                             f"{want[0]} x {want[1]}")


def _check(function: str, argument: str, section: str, values) -> None:
    """``values`` checked by the config section ``section``'s schema (:mod:`neurd.schema`):
    the rules and words a config file's value gets, naming the argument."""
    try:
        check_section(section, values)
    except ConfigError as error:
        raise ConfigError(f"engine.{function}: argument {argument}: {error}", error.key) \
            from None


def _check_iterations(function: str, iterations) -> None:
    """As config key ``tabular.iterations`` (CFR iterations per run)."""
    _check(function, "iterations", "tabular", {"iterations": iterations})


def _check_step_size(function: str, form: SequenceForm, step_size) -> None:
    """A number, or one per information state (``[I, 1]``), each as an item of config key
    ``tabular.step_sizes`` (positive, finite, at most its maximum)."""
    if isinstance(step_size, (str, bytes, bool)) or step_size is None:
        _check(function, "step_size", "tabular", {"step_sizes": [step_size]})
    try:
        eta = np.asarray(step_size, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"engine.{function}: argument step_size must be a number or an array "
                          f"of numbers, got {step_size!r}", "tabular.step_sizes") from None
    if eta.ndim and eta.shape != (form.num_infostates, 1):
        raise ValueError(f"engine.{function}: argument step_size must be a number or have shape "
                         f"({form.num_infostates}, 1), got shape {eta.shape}")
    if eta.size:  # the smallest and the largest: the schema's bounds are one on each side
        _check(function, "step_size", "tabular", {
            "step_sizes": sorted({float(np.min(eta)), float(np.max(eta))})
            if np.all(np.isfinite(eta)) else [float(eta.flat[np.flatnonzero(
                ~np.isfinite(eta))[0]])]})
