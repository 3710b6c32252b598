"""What every stage of the pipeline declares: the type of the stage registry's entries.

A stage is a module of :mod:`neurd.pipeline` with a module-level ``STAGE``
(:class:`Stage`): the config section it computes from, its cross-field
checks, the figures it feeds and its ``neurd <step>`` command-line steps.
:mod:`neurd.stages` finds every stage with one loop; the Snakefile, the
config validation, the snapshot rule, the figure rules and the provenance
all read that one registry.  The type lives below both the stages and the
registry, so that every import runs one way (``tests/test_imports.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from neurd.config import ConfigError, load_snapshot
from neurd.precision import float64
from neurd.tables import InputFileError


@dataclass(frozen=True)
class Figure:
    """A figure a stage feeds: ``results/figures/<name>.png`` drawn by ``neurd.figures.<module>``.

    ``wildcards`` fill the placeholders of the module's ``INPUTS`` paths
    (Fig 4b's ``{game}``); ``folder``: where, under the results folder, those
    paths are (``""``: the results folder itself; ``published/paper`` for Fig 6
    drawn from the published paper-scale tables); ``config``: the config
    snapshot the figure reads, relative to the results folder (default: its
    section's, ``config/<section>.json``).
    """

    name: str
    module: str
    wildcards: Mapping[str, str] = field(default_factory=dict)
    folder: str = ""
    config: str | None = None


@dataclass(frozen=True)
class Stage:
    """One stage: its config section, checks, figures and command-line steps.

    ``check(cfg)`` raises :class:`~neurd.config.ConfigError` naming the key
    for what the schema cannot express (one value against another);
    ``figures(cfg)`` lists the :class:`Figure` s the section makes;
    ``register(stage, sub)`` adds the steps with :meth:`add_step`;
    ``float64``: whether the steps compute in double precision;
    ``settings``: keys of the section that change no number (how a job is
    scheduled or how often it saves its state): they stay out of the config
    snapshot, so out of every hash the tables and checkpoints are keyed on,
    and the rules read them from the config itself;
    ``derive(config)``: sections this stage derives from the whole config, as
    ``{label: (section, cfg)}``, each validated like that section (schema,
    checks, ``inspect``), errors prefixed with the label (the readings study's
    ``neural`` sections);
    ``inspect(cfg, limits)``: the checks that need more than the section's
    values -- the games it names, loaded by OpenSpiel, and what a run will
    allocate, write and ask a scheduler for against the config's ``limits``
    (:mod:`neurd.limits`); run when a config is validated (the Snakefile,
    ``neurd check-config``), not when a step reads its snapshot.
    """

    section: str
    check: Callable[[Mapping], None]
    figures: Callable[[Mapping], list[Figure]]
    register: Callable
    float64: bool = True
    settings: tuple[str, ...] = ()
    inspect: Callable[[Mapping, Mapping], None] | None = None
    derive: Callable[[Mapping], Mapping] | None = None

    def load(self, path: str | os.PathLike) -> dict:
        """The section's config snapshot at ``path``, checked; errors name the file."""
        try:
            cfg = load_snapshot(path)
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read config snapshot {path}: {error}") from None
        if not isinstance(cfg, dict):
            raise ConfigError(f"{path}: a config snapshot is a JSON object, got "
                              f"{type(cfg).__name__}")
        try:
            self.check(cfg)
        except ConfigError as error:
            raise ConfigError(f"{path}: {error}") from None
        except (KeyError, TypeError) as error:
            raise ConfigError(f"{path} is not a '{self.section}' config snapshot (the "
                              f"'{self.section}' section with the seed, as the config_snapshot "
                              f"rule writes it): {type(error).__name__} {error}") from None
        return cfg

    def add_steps(self, sub) -> None:
        """Add every step of this stage to the ``neurd`` command line."""
        self.register(self, sub)

    def add_step(self, sub, name: str, summary: str, func: Callable):
        """Add ``neurd <name>``: ``func(args, cfg)`` with the checked snapshot of ``--config``."""
        parser = sub.add_parser(name, help=summary)
        parser.add_argument("--config", required=True,
                            help=f"{self.section} config snapshot (JSON)")

        def run(args):
            check_outputs(parser, args)
            cfg = self.load(args.config)
            if self.float64:
                with float64():
                    return func(args, cfg)
            return func(args, cfg)

        parser.set_defaults(func=run)
        return parser


def check_outputs(parser, args) -> None:
    """Refuse, before anything computes, an output path a step could not write at its end:
    every argument whose help begins with "output" names a file whose folder is a folder (or
    can be made) and that is not itself a folder ("output folder": a folder, not a file);
    :class:`~neurd.tables.InputFileError` naming the argument and the path."""
    for action in parser._actions:  # argparse lists its arguments only there
        words = str(action.help or "")
        if not words.startswith("output"):
            continue
        value = getattr(args, action.dest, None)
        for path in [value] if isinstance(value, str) else list(value or []):
            flag = action.option_strings[0] if action.option_strings else action.dest
            target = Path(path)
            if words.startswith("output folder"):
                if target.exists() and not target.is_dir():
                    raise InputFileError(f"{flag} {path} is a file, not a folder the step "
                                         "can write into")
                continue
            if target.is_dir():
                raise InputFileError(f"{flag} {path} is a folder, not a file the step can "
                                     "write: give a file's path")
            folder = next((p for p in target.parents if p.exists()), None)
            if folder is not None and not folder.is_dir():
                raise InputFileError(f"{flag} {path}: {folder} is a file, not a folder the "
                                     "step can write into")
            if folder is not None and not os.access(folder, os.W_OK | os.X_OK):
                raise InputFileError(f"{flag} {path}: the folder {folder} cannot be written")

