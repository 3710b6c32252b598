"""Pipeline stages: config section in, tidy tables out (one module per stage)."""
