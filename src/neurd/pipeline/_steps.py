"""What every stage's command-line step shares (not a stage: the CLI skips ``_`` modules)."""

from __future__ import annotations


def add_step(sub, name: str, summary: str, func, section: str):
    """Add step ``neurd <name>``, reading the config snapshot of ``section``; returns its parser."""
    parser = sub.add_parser(name, help=summary)
    parser.add_argument("--config", required=True, help=f"{section} config snapshot (JSON)")
    parser.set_defaults(func=func)
    return parser
