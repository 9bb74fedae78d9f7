"""Import NLTK without the SciPy and NumPy it pulls in for measures we never use.

``import nltk`` (which any ``nltk.*`` import runs first) imports everything, including
``nltk.metrics.association``, whose ``from scipy.stats import fisher_exact`` loads SciPy
(~0.6 s), and ``nltk.metrics.aline`` and ``nltk.metrics.segmentation``, whose ``import numpy``
loads NumPy (~0.15 s, then ``nltk.cluster`` with it): on every CLI run with BLEU, GLEU or
METEOR, in the runner's process and again in its classic worker. NLTK guards those imports
(``except ImportError``: Fisher's exact test then raises NotImplementedError, ALINE and the
generalized Hamming distance have no NumPy, ``nltk.cluster`` is not loaded), and none of them is
on the classic metrics' path (tokenizers, WordNet). So we hide the two packages for the duration
of NLTK's own import and put them back at once: a later ``import scipy`` or ``import numpy``
anywhere in the process works as usual. A package already loaded is never hidden (NLTK then
imports exactly as it always does), and NumPy only while this thread is the process's only one
(another thread's ``import numpy`` during those ~0.4 s would fail).
"""
from __future__ import annotations

import sys
import threading

_LOCK = threading.Lock()


def import_nltk():
    """``import nltk``, SciPy and NumPy left out (see the module docstring); returns the module."""
    mod = sys.modules.get("nltk")
    if mod is not None:
        return mod
    with _LOCK:
        hidden = [name for name in ("scipy", "numpy") if name not in sys.modules
                  and (name == "scipy" or threading.active_count() == 1)]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # "import scipy" raises ImportError
        try:
            import nltk
        finally:
            for name in hidden:
                if name in sys.modules and sys.modules[name] is None:
                    del sys.modules[name]
    return nltk
