"""The one project exception.

Every bad input anywhere in ``tpmath`` raises ``TPMathError(code, field, **args)``: ``code``
names the sentence (``content/i18n/<lang>.errors.toml``, key ``error.<code>``), ``field`` the
input or control at fault, ``args`` the values the sentence quotes.  No language lives here:
the page translates :attr:`TPMathError.cell` with its own strings, the command lines print
:meth:`TPMathError.message` in their ``--lang``, and ``str(err)`` is the default language.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .i18n import DEFAULT_LANG, Text, text

SHORT = 60   # a quoted input longer than this is cut (one-line messages)


def quoted(value: Any) -> Any:
    """A value as a message quotes it: text as typed, numbers as Python writes them, cells kept."""
    if isinstance(value, dict):
        return value                                  # a cell (e.g. a translated name)
    if isinstance(value, str):
        shown = value
    elif isinstance(value, (bool, np.bool_)):
        shown = str(bool(value))
    elif isinstance(value, (int, np.integer)):
        shown = str(int(value))
    elif isinstance(value, (float, np.floating)):
        shown = repr(float(value))
    else:
        shown = repr(value)
    return shown


def short(text: Any) -> Any:
    """A quoted input cut to :data:`SHORT` characters (messages are one line)."""
    return text if not isinstance(text, str) or len(text) <= SHORT else text[: SHORT - 1] + "…"


class TPMathError(ValueError):
    """Bad input to the tensor-parallel core: ``str(err)`` is the message in the default language."""

    def __init__(self, code: str, field: str | None = None, **args: Any):
        super().__init__(code)
        self.code = code
        self.field = field              # the input / control name at fault, when there is one
        # ``value`` is what the user gave, which can be long; the other arguments are the code's.
        self.values = {k: short(quoted(v)) if k == "value" else quoted(v) for k, v in args.items()}

    @property
    def cell(self) -> Text:
        """The message as a translation cell (what the page receives)."""
        return Text(f"error.{self.code}", **self.values)

    def message(self, lang: str = DEFAULT_LANG) -> str:
        """The message in ``lang``."""
        return text(self.cell, lang)

    def __str__(self) -> str:
        return self.message()


def name(field: str) -> Text:
    """The reader's name of an input (``name.<field>``), as an argument of a message."""
    return Text(f"name.{field}")
