"""One module per paper figure: ``plot(...)`` draws it, ``claims(...)`` audits it."""
