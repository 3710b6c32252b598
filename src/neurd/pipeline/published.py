"""Fig 6 drawn from a published run (:mod:`neurd.publication`): the paper scale's, computed
once on a GPU and shipped in the repository, so any machine draws it.

Config section ``published``: ``folder``, the publication (``published/paper``; ``null``
draws none), and ``configfile``, the config file it must be the run of
(``workflow/config/paper.yaml``): the publication's neural config snapshot must be that
file's ``neural`` section as it is now, merged over the defaults, or the config is refused
when validated (a stale publication is never drawn).  Where the folder holds a
publication, the workflow draws ``fig6_<name>`` (``<name>``: the folder's last part) with its
claims audit from it, beside the scale's own ``fig6``.

This stage needs no other config file: it checks, when a config is validated, that a
configured folder is a publication (not missing, emptied or a file) and lists the figure.
What reads a config file -- the check that the publication is the run of ``configfile`` as
it is now, and the ``neurd`` commands that publish, check, reproduce and combine it -- is
:mod:`neurd.publication.commands`, above the stage registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from neurd.config import ConfigError
from neurd.publication import MANIFEST, PublicationError, published_games, read_manifest
from neurd.publication import check as check_publication
from neurd.stage import Figure, Stage

COMBINED = ("nashconv", "nashconv_ci", "summary", "diagnostics")  # Fig 6's inputs


def name(cfg: Mapping) -> str | None:
    """The publication's name (its folder's last part), or None without a folder."""
    return None if cfg.get("folder") is None else Path(cfg["folder"]).name


def drawn(cfg: Mapping) -> bool:
    """Whether there is a publication to draw: a folder with at least one block."""
    return cfg.get("folder") is not None and bool(published_games(cfg["folder"]))


def inputs(cfg: Mapping) -> list[str]:
    """Every file of the publication (the manifest and what it lists)."""
    manifest = read_manifest(Path(cfg["folder"]))
    return [f"{cfg['folder']}/{MANIFEST}", *(f"{cfg['folder']}/{f}" for f in manifest["files"])]


def check(cfg: Mapping) -> None:
    """Nothing beyond the schema (``folder`` is ``published/<name>``)."""


def inspect(cfg: Mapping, limits: Mapping) -> None:
    """A configured folder is a publication: there, not emptied, not a file, its files as its
    manifest lists them (:func:`neurd.publication.check`); whether it is the run of
    ``configfile`` as it is now is :func:`neurd.publication.commands.check_configured`'s."""
    if cfg.get("folder") is None:
        return
    try:
        check_publication(cfg["folder"])
    except PublicationError as error:
        raise ConfigError(f"published.folder: {error} (set published.folder to null to draw "
                          "no publication)") from None


def figures(cfg: Mapping) -> list[Figure]:
    if not drawn(cfg):
        return []
    label = name(cfg)
    return [Figure(f"fig6_{label}", "fig6", folder=f"published/{label}",
                   config=f"published/{label}/config/neural.json")]


STAGE = Stage(section="published", check=check, figures=figures,
              register=lambda stage, sub: None, float64=False, inspect=inspect)
