"""Import NLTK without the SciPy it pulls in for one measure we never use.

``import nltk`` (which any ``nltk.*`` import runs first) imports everything, including
``nltk.metrics.association``, whose ``from scipy.stats import fisher_exact`` loads SciPy:
~0.6 s of a ~1.1 s import, on every CLI run with BLEU, GLEU or METEOR. NLTK guards that
import (``except ImportError``: Fisher's exact test then raises NotImplementedError), so we
hide SciPy for the duration of NLTK's own import and put it back at once: a later
``import scipy`` anywhere in the process works as usual. When SciPy is already loaded,
nothing is hidden and NLTK imports exactly as it always does.
"""
from __future__ import annotations

import sys
import threading

_LOCK = threading.Lock()


def import_nltk():
    """``import nltk``, SciPy left out (see the module docstring); returns the module."""
    mod = sys.modules.get("nltk")
    if mod is not None:
        return mod
    with _LOCK:
        hide = "scipy" not in sys.modules
        if hide:
            sys.modules["scipy"] = None  # type: ignore[assignment]  # "import scipy" raises ImportError
        try:
            import nltk
        finally:
            if hide and sys.modules.get("scipy", 0) is None:
                del sys.modules["scipy"]
    return nltk
