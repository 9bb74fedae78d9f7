"""Built-in metrics. Importing this package registers each one (one module per metric)."""
from evaluators.metrics import bleu, f1, gleu, meteor, rouge  # noqa: F401  classic, in-process
from evaluators.metrics import coherence, fluency, groundedness, relevance, retrieval, similarity  # noqa: F401  LLM judge
from evaluators.metrics import hate_unfairness, sexual, violence, self_harm, protected_material, indirect_attack  # noqa: F401  safety
from evaluators.metrics import wildbench_score, wildbench_pairwise  # noqa: F401,I001  WildBench (checklist score, pairwise)
