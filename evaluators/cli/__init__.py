"""Layer 8, the top: the command line (``python -m evaluators``). ``main`` holds the commands; ``safety`` and
``wildbench`` the suites' subcommands."""
