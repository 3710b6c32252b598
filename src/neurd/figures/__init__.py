"""One module per paper figure: ``plot(...)`` draws it, ``claims(...)`` audits it."""

from neurd.names import game_title


def report_label(name: str) -> str:
    """A figure's row in the report: "Fig 1" .. "Fig 6", each figure's extras right after it
    ("Fig 4b, Kuhn poker"; "Fig 6, published/paper" for Fig 6 drawn from a publication).
    The report sorts its rows by label, so the figures come in the paper's order."""
    base, _, extra = name.partition("_")
    label = f"Fig {base.removeprefix('fig')}"
    if not extra:
        return label
    return f"{label}, published/{extra}" if base == "fig6" else f"{label}, {game_title(extra)}"
