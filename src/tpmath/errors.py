"""The one project exception.

Every bad input anywhere in ``tpmath`` raises :class:`TPMathError`.  The
message quotes the offending value(s).  Each raise site gives the English text
and, where a reader of the Chinese page can meet it, the Chinese text too, so
the browser can show the error in the page's language without a lookup table
that could drift from the raise site.
"""

from __future__ import annotations


class TPMathError(ValueError):
    """Bad input to the tensor-parallel core: ``str(err)`` is the English message."""

    def __init__(self, en: str, zh: str | None = None, field: str | None = None):
        super().__init__(en)
        self.en = en
        self.zh = zh if zh is not None else en
        self.field = field  # the input / control name at fault, when there is one

    def message(self, lang: str = "en") -> str:
        """The message in ``lang`` (``"en"`` or ``"zh"``); English for anything else."""
        return self.zh if lang == "zh" else self.en
