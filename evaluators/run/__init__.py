"""Layer 4: running an evaluation. The run spec, the planner and runner (judge calls with bounded concurrency,
classic metrics in a forked worker), and the dashboard's run workers. Imports the layers below."""
