"""What the two command lines share (``python -m tpmath`` and ``python -m tpmath.real``).

argparse that reports through :class:`~tpmath.TPMathError`, negative numbers as option values,
``--lang``, the one ``error: …`` line, and a quiet end when the reader of stdout goes away.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from . import i18n
from .errors import TPMathError
from .i18n import Text

# Said in code because it is the one message that cannot come from the message files.
NO_MESSAGES = "error: tpmath's message files (content/i18n/*.errors.toml) were not found"


class Parser(argparse.ArgumentParser):
    """argparse that raises TPMathError instead of printing usage and exiting."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise TPMathError("usage", detail=message, prog=self.prog)


def join_negative_values(argv: list[str]) -> list[str]:
    """``--shift -1e4`` → ``--shift=-1e4``: argparse would take ``-1e4`` for an option.

    (argparse only recognises plain negative numbers like ``-3`` or ``-0.5`` as values.)
    """
    out: list[str] = []
    for tok in argv:
        prev = out[-1] if out else ""
        if tok.startswith("-") and prev.startswith("--") and "=" not in prev and _is_number(tok):
            out[-1] = f"{prev}={tok}"
        else:
            out.append(tok)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def take_lang(argv: list[str]) -> tuple[str, list[str]]:
    """``--lang LANG`` / ``--lang=LANG`` taken out of ``argv`` (default :data:`i18n.DEFAULT_LANG`);
    an unknown language is an error (in the default language)."""
    lang, rest, i = i18n.DEFAULT_LANG, [], 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--lang" and i + 1 < len(argv):
            lang, i = argv[i + 1], i + 2
            continue
        if tok.startswith("--lang="):
            lang = tok.split("=", 1)[1]
        else:
            rest.append(tok)
        i += 1
    if lang not in i18n.languages():
        raise TPMathError("unknown_language", "lang", value=lang, choices=", ".join(i18n.languages()))
    return lang, rest


def speak_argparse(lang: str) -> None:
    """argparse's own messages ("unrecognized arguments: …") in ``lang``: content/i18n's
    ``cli.argparse.*`` strings, found by their English text, which is argparse's message id.
    argparse looks its messages up through the module's ``_`` at the time it raises them; a
    command line is one process speaking one language, so replacing it there is enough."""
    said, english = i18n.strings(lang), i18n.strings(i18n.DEFAULT_LANG)
    table = {english[k]: said[k] for k in english if k.startswith("cli.argparse.") and k in said}
    argparse._ = lambda message: table.get(message, message)


def start(argv: list[str], quiet: bool = False) -> tuple[str, list[str]] | None:
    """(language, the other arguments); None when the run must end at once (status 2) because the
    message files are missing or ``--lang`` names no language, after its one error line (unless
    ``quiet``: under torchrun only rank 0 speaks)."""
    if not i18n.languages():
        if not quiet:
            print(NO_MESSAGES, file=sys.stderr)
        return None
    try:
        lang, rest = take_lang(argv)
    except TPMathError as err:
        if not quiet:
            say_error(err, i18n.DEFAULT_LANG)
        return None
    speak_argparse(lang)
    return lang, rest


def say_error(err: TPMathError, lang: str) -> None:
    """The one ``error: …`` line on stderr."""
    print(f"error: {' '.join(err.message(lang).splitlines())}", file=sys.stderr)


def quiet_on_closed_pipe(main: Callable[[], int]) -> int:
    """``main()``, but a reader that closed stdout (``… | head``) ends the run with status 1 and
    no BrokenPipeError traceback."""
    try:
        return main()
    except BrokenPipeError:
        # Nobody is left to tell.  Point stdout at /dev/null so the interpreter's own flush at
        # exit does not fail (and print a traceback) too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


class Series(tuple):
    """Values a help string names in running text: joined with the language's ``cli.series_sep``
    (", " in English, "、" in Chinese), where a plain list of values (``{choices}``) is quoted
    comma-separated in every language."""


def say_help(key: str, lang: str, **args) -> str:
    """A help string in ``lang``; a list of values is quoted comma-separated, a :class:`Series`
    in the language's way.  (argparse %-formats help strings, so a literal % is doubled.)"""
    def said(v) -> str:
        if isinstance(v, Series):
            return i18n.text(Text("cli.series_sep"), lang).join(map(str, v))
        return ", ".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)
    args = {k: said(v) for k, v in args.items()}
    return i18n.text(Text(key, **args), lang).replace("%", "%%")


# argparse's section headings -> their keys
_HEADINGS = {"positional arguments": "cli.positionals", "options": "cli.options"}


def help_formatter(lang: str, raw: bool = False) -> dict:
    """What every parser of ``lang`` is made with: a formatter that says argparse's own words
    (``usage:``, the section headings) in ``lang``; ``raw`` keeps a pre-wrapped epilog's lines."""
    base = argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter

    class Formatter(base):
        def add_usage(self, usage, actions, groups, prefix=None):
            super().add_usage(usage, actions, groups, say_help("cli.usage", lang) if prefix is None else prefix)

        # A heading's string carries its own colon (the language's: full-width in Chinese);
        # argparse appends an ASCII one, which is taken off again below.
        def start_section(self, heading):
            super().start_section(say_help(_HEADINGS[heading], lang) if heading in _HEADINGS else heading)

        def format_help(self):
            text = super().format_help()
            for key in _HEADINGS.values():
                said = say_help(key, lang)
                text = text.replace(f"{said}:\n", f"{said}\n")
            return text

    return {"formatter_class": Formatter}
