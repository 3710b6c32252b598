""":class:`~neurd.stage.Figure` and :class:`~neurd.stage.Stage`, for a stage that imports
them from the pipeline package (:mod:`neurd.stage` defines them)."""

from neurd.stage import Figure, Stage

__all__ = ["Figure", "Stage"]
