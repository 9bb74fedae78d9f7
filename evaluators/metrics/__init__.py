"""Built-in metrics, one module each; :func:`load_builtins` registers them all (the package's root hands it to
the registry, which calls it before it is first read)."""


def load_builtins() -> None:
    """Import every built-in metric module, in the order pickers list them; each registers its metric."""
    # One module a line, in this order (isort would sort them): the order is the pickers' within each family.
    from evaluators.metrics import bleu, f1, gleu, meteor, rouge  # noqa: F401,I001  classic, in-process
    from evaluators.metrics import coherence, fluency, groundedness, relevance, retrieval, similarity  # noqa: F401
    from evaluators.metrics import hate_unfairness, sexual, violence, self_harm  # noqa: F401,I001  safety
    from evaluators.metrics import protected_material, indirect_attack  # noqa: F401,I001
    from evaluators.metrics import wildbench_score, wildbench_pairwise  # noqa: F401,I001  WildBench
    from evaluators.metrics import intent_resolution, task_adherence, task_completion, response_completeness  # noqa: F401,I001
    from evaluators.metrics import tool_call_accuracy, tool_selection, tool_input_accuracy  # noqa: F401,I001
    from evaluators.metrics import tool_call_success, tool_output_utilization  # noqa: F401,I001
    from evaluators.metrics import document_retrieval, task_navigation_efficiency  # noqa: F401,I001  agents
