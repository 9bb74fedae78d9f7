"""Layer 5: reading results. Per-row cells and aggregates, the columnar views the dashboard reads, comparisons,
charts, the HTML report and exports (rows.jsonl, metrics.json, CSV)."""
