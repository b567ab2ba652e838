"""tpmath: the numpy core of *tensor-parallel explained*.

Every number on the site is computed here, next to its unsharded reference.
numpy + standard library only, so the same code runs in CPython and in Pyodide.

Conventions shared by every module
----------------------------------
- A "world" is a plain ``list[np.ndarray]``, one entry per rank; there is no
  hidden global state.
- Megatron's orientation: a linear layer is ``Y = X A`` with ``A`` of shape
  ``(in, out)``.
- Bad input raises :class:`TPMathError` (see ``errors.py``).
"""

from .errors import TPMathError

__all__ = ["TPMathError"]
__version__ = "0.1.0"
