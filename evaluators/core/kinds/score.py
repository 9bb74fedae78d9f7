"""The ``score`` kind: the base behaviour of :class:`evaluators.kinds.Kind`, registered under its name."""
from . import Kind, register_kind

SCORE = register_kind(Kind())
