"""Layer 3: the store. SQLAlchemy tables for datasets, runs, results and the judge-call cache; idempotent writes
keyed by (run, row, metric, turn). Imports ``core`` and ``data``."""
