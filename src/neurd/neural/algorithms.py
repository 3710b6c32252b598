"""The algorithms a neural run may name: a registry of policy losses in the logits.

An algorithm is one loss of the policy network's logits over the visited information
states (the learner's step 2, :mod:`neurd.neural.improvement`): everything else of a run --
the sampling, the critic, the pullback to the weights, the optimiser -- is shared, so two
algorithms differ in exactly this function.  Its signature (rlax's style of shapes)::

    loss(logits [I, A], q [I, A], legal [I, A] bool, weights [I], **options)
        -> (scalar loss to descend, scalar share of pushes blocked)

``q`` is the action values the critic gives (a constant: the loss must not differentiate
it), ``weights`` each state's weight in the loss.  ``options`` are the keywords the
algorithm declares (``register(..., options=(...))``) and no other: NeuRD's are ``beta``,
its logit threshold (the config key ``neural.beta``), and ``centre``, its logits' reading
(``neural.neurd_logits``: :data:`neurd.neural.losses.CENTRINGS`); a user's algorithm takes
its own from the config key ``neural.algorithm_options`` (``{name: {option: value}}``),
its loss's defaults where none is given.  A config or ``compare()`` that gives an option to
an algorithm that does not take it is refused, naming both (:func:`check_options`).
An algorithm of the sampled actions (``sampled=True``, as A2C) is called with one more
keyword, ``taken [I, A]``: the share of the policy update's sampled steps at each state that took
each action (a visited state's row sums to 1); the others see the states' weights only.
An algorithm whose loss is a sum over the states of each state's weight times a term of
that state alone, so that a state of weight 0 adds nothing to the loss nor to its
gradient, says so (``weighted=True``, as every built-in one): where every algorithm of a
run is weighted, the cycle may lay its step 2 out over the visited states only
(:mod:`neurd.neural.layouts`: ``map_visited``, the default where that saves time), the
others then never evaluated.  A loss that reads a state of weight 0 (a penalty over every
state, say) leaves it ``False``, the default: its runs pass over every state.

=========  ==============================================  ======================================
name       loss per state (``A = q - v``, ``v = sum pi q``)  where it is from
=========  ==============================================  ======================================
``neurd``  ``-sum_a y(a) A(a)``, thresholded at ``beta``  the paper (Algorithm 1, eq. nerd_sampled)
``spg``    ``-sum_a pi(a) A(a)``                         the paper's all-actions SPG; OpenSpiel's
                                                           QPG is the same loss (tested)
``rmpg``   ``-sum_a pi(a) [A(a)]^+``                     OpenSpiel's ``BatchRMLoss``
``rpg``    ``sum_a [q(a) - v]^+``, ``v`` differentiated   OpenSpiel's ``BatchRPGLoss``
``a2c``    ``-sum_a taken(a) log pi(a) A(a)``              OpenSpiel's ``BatchA2CLoss`` (sampled
                                                           actions; its ``A`` from this ``q``)
=========  ==============================================  ======================================

(``A`` a constant where written so.)  A user adds an algorithm with :func:`register`, from
Python, before the run is made; a config names only registered algorithms (a config never
imports code), and an installed package can register its own on import through the
entry-point group :data:`ENTRY_POINTS` (``[project.entry-points."neurd.algorithms"]
mine = "my_package.algorithms"``: imported by :func:`load_entry_points` when a config names
an algorithm not registered yet, in the workflow's jobs as in Python).  Fig 6 draws and
audits NeuRD and SPG; the tables hold every algorithm a run names.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points

from neurd.config import ConfigError
from neurd.names import ALGORITHM_LABELS, NEURD, SPG

ENTRY_POINTS = "neurd.algorithms"
RMPG, RPG, A2C = "rmpg", "rpg", "a2c"
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
OPTION = re.compile(r"[a-z_][a-z0-9_]{0,31}")


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: its name (the config's word), its label in figures, its loss
    (the module docstring's signature; or ``"module:function"``, imported when first asked
    for, so that naming an algorithm in a config imports no JAX) and where it is from."""

    name: str
    label: str
    loss: Callable | str
    source: str = ""
    sampled: bool = False  # its loss reads the sampled actions (the keyword ``taken``)
    weighted: bool = False  # a state of weight 0 adds nothing to its loss (the module)
    options: tuple[str, ...] = ()  # the keywords its loss takes (the module)

    def function(self) -> Callable:
        """The loss itself."""
        if callable(self.loss):
            return self.loss
        module, _, attribute = self.loss.partition(":")
        return getattr(import_module(module), attribute)


_REGISTRY: dict[str, Algorithm] = {}
_LOADED: set[str] = set()  # the entry points imported


def register(name: str, loss: Callable, label: str | None = None, source: str = "",
             sampled: bool = False, weighted: bool = False, replace: bool = False,
             options: tuple[str, ...] = ()) -> Algorithm:
    """Register ``loss`` as the algorithm ``name`` (lower case, digits and ``_``, at most 32
    characters; ``label``: its name in figures, default ``name`` upper-cased; ``sampled``:
    its loss takes the keyword ``taken``; ``weighted``: a state of weight 0 adds nothing to
    its loss nor to its gradient; ``options``: the keywords its loss takes, given by
    ``neural.algorithm_options``; see the module).  A built-in name (:data:`BUILT_IN`) is
    never replaced; a user's name registered already with anything else (its loss, label,
    source or flags) is refused unless ``replace=True`` (registering the same twice, as a
    module imported again does, is no change)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"algorithm name {name!r}: lower-case letters, digits and _, starting "
                         "with a letter, at most 32 characters")
    if not (callable(loss) or (isinstance(loss, str) and ":" in loss)):
        raise ValueError(f"algorithm {name!r}: its loss {loss!r} is not callable")
    if label is not None and not (isinstance(label, str) and label.strip()):
        raise ValueError(f"algorithm {name!r}: label {label!r} is not a non-empty string")
    for flag, value in (("sampled", sampled), ("weighted", weighted), ("replace", replace)):
        if not isinstance(value, bool):
            raise ValueError(f"algorithm {name!r}: {flag} {value!r} is not True or False")
    if isinstance(options, str) or not all(
            isinstance(o, str) and OPTION.fullmatch(o) and o != "taken" for o in options):
        raise ValueError(f"algorithm {name!r}: options {options!r} are not a tuple of keyword "
                         "names (lower case, digits and _; not 'taken')")
    algorithm = Algorithm(name, label or name.upper(), loss, source, sampled, weighted,
                          tuple(options))
    known = _REGISTRY.get(name)
    if known is not None and known != algorithm:
        if name in BUILT_IN:
            raise ValueError(f"algorithm {name!r} is built in and cannot be replaced; register "
                             "yours under another name")
        if not replace:
            raise ValueError(f"algorithm {name!r} is registered already (with "
                             f"{getattr(known.loss, '__qualname__', known.loss)!r}); choose "
                             "another name, or pass replace=True to replace it")
    _REGISTRY[name] = algorithm
    return algorithm


def get(name: str) -> Algorithm:
    """The registered algorithm ``name``; a :class:`ValueError` naming those registered."""
    if isinstance(name, str) and name not in _REGISTRY:
        load_entry_points()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"algorithm {name!r} is not registered (registered: "
                         f"{', '.join(registered())}; add one with "
                         "neurd.neural.algorithms.register)") from None


def options_for(name: str, **values) -> dict:
    """Those of ``values`` that algorithm ``name`` declares as options: the keywords to call
    its loss with (``get(name).function()(logits, q, legal, weights, **options_for(name,
    beta=2.0, centre=True))``)."""
    declared = get(name).options
    return {option: value for option, value in values.items() if option in declared}


def check_algorithms(names, key: str) -> None:
    """Refuse (a :class:`~neurd.config.ConfigError` naming ``key``) a name of ``names`` that
    is not registered."""
    if any(name not in _REGISTRY for name in names):
        load_entry_points()
    for index, name in enumerate(names):
        if name not in _REGISTRY:
            raise ConfigError(f"config key '{key}[{index}]': {name!r} is not registered "
                              f"(registered: {', '.join(registered())}; add one with "
                              "neurd.neural.algorithms.register)", f"{key}[{index}]")


# The built-in algorithms' numbers in their random streams: each one's place in the default
# order of a run's algorithms, as the streams were numbered when a configuration's number was
# its algorithm's place in its run's list (every run of [neurd, spg] draws what it drew).
BUILT_IN_STREAMS = {NEURD: 0, SPG: 1, RMPG: 2, RPG: 3, A2C: 4}
# a user's algorithm's number: its name's CRC-32 above the built-ins' (never one of theirs)
USER_STREAMS = 1 << 10


def stream_index(name: str) -> int:
    """The number an algorithm's configurations fold into their random streams
    (:func:`neurd.neural.train.configuration_keys`): the algorithm's own, from its name, so
    that no algorithm's numbers depend on which others a run names, nor in what order."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"algorithm name {name!r}: lower-case letters, digits and _, starting "
                         "with a letter, at most 32 characters")
    if name in BUILT_IN_STREAMS:
        return BUILT_IN_STREAMS[name]
    return USER_STREAMS + zlib.crc32(name.encode()) % ((1 << 31) - USER_STREAMS)


def registered() -> tuple[str, ...]:
    """The names registered, the paper's two first."""
    return tuple(_REGISTRY)


def load_entry_points() -> list[str]:
    """Import every module of the entry-point group :data:`ENTRY_POINTS` not imported yet
    (each registers its algorithms on import); the names of the entry points loaded.  A name
    not registered is looked for here before it is refused."""
    loaded = []
    for point in entry_points(group=ENTRY_POINTS):
        if point.value in _LOADED:
            continue
        point.load()
        _LOADED.add(point.value)
        loaded.append(point.name)
    return loaded


_LOSSES = "neurd.neural.losses"
# the options that are keys of the config section neural (a loss's keyword -> its key), and
# the built-in algorithms that take each
OPTION_KEYS = {"beta": "beta", "centre": "neurd_logits"}
OPTION_OWNERS = {"beta": (NEURD,), "centre": (NEURD,)}
BUILT_IN = (NEURD, SPG, RMPG, RPG, A2C)  # registered here; never replaced
# each built-in loss is sum_x weights(x) * (a term of x alone): weighted
register(NEURD, f"{_LOSSES}:neurd_loss", ALGORITHM_LABELS[NEURD],
         "the paper: Algorithm 1 with the Remark's logit threshold", weighted=True,
         options=("beta", "centre"))
register(SPG, f"{_LOSSES}:spg_loss", ALGORITHM_LABELS[SPG],
         "the paper's all-actions softmax policy gradient (OpenSpiel's QPG)", weighted=True)
register(RMPG, f"{_LOSSES}:rmpg_loss", "RMPG",
         "OpenSpiel rl_losses.BatchRMLoss (Srinivasan et al. 2018)", weighted=True)
register(RPG, f"{_LOSSES}:rpg_loss", "RPG",
         "OpenSpiel rl_losses.BatchRPGLoss (Srinivasan et al. 2018)", weighted=True)
register(A2C, f"{_LOSSES}:a2c_loss", "A2C",
         "OpenSpiel rl_losses.BatchA2CLoss (sampled actions; advantage from the harness's q)",
         sampled=True, weighted=True)
