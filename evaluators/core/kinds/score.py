"""The ``score`` kind: the base behaviour of :class:`evaluators.core.kinds.Kind`, registered under its name."""
from evaluators.core.kinds.base import Kind, register_kind

SCORE = register_kind(Kind())
