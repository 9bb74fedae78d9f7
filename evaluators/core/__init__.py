"""Layer 1, the bottom: what every other layer speaks in. The metric registry and its specs, the kinds of value
(score, severity, label, pairwise, WildBench score) with their parsing, combining and aggregates, the judge-reply
reader (one place for ``<think>`` blocks and fences), statistics and errors. Imports nothing of the engine above it."""
