"""Sentences for readers: translation cells, and the strings Python itself prints.

Every sentence a reader sees lives in ``content/i18n/<lang>*.toml``, never in the code.  The
code hands out *cells* (ARCHITECTURE.md, "Element trees")::

    cell := "verbatim text" | {"key": "i18n.key", "args": {NAME: cell}}

The page translates cells with its embedded strings; the builder with the content it loaded.
Python needs its own copy only where it prints text itself: the command lines (``python -m
tpmath``, ``python -m tpmath.real``) and ``str(TPMathError)``.  Those strings are the files
``content/i18n/<lang>.<part>.toml`` for each part of :data:`PARTS`; they are found

* in a wheel, in ``tpmath/i18n/`` (``tpsite.wheel`` copies them into both wheels);
* in a source checkout or an editable install, in ``content/i18n/`` next to ``src/``.

Languages are whatever files are there: a new language is content files only.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Any

# The string files Python prints from: content/i18n/<lang>.<part>.toml (cli: the command line's help).
PARTS = ("errors", "core", "cli", "figwrap")   # figwrap: figure text the views measure
# The command lines' language unless --lang says otherwise.
DEFAULT_LANG = "en"
PLACEHOLDER = re.compile(r"\{(\w+)\}")      # the page's rule too (app.js): only {name} is replaced


class Text(dict):
    """A translation cell ``{"key": KEY, "args": {NAME: cell}}`` (``args`` only when there are any).

    A dict, so it is JSON as it stands (view results, the worker's payload); its own type lets
    the command line find the cells in a core result and print them in its language.
    """

    def __init__(self, key: str, **args: Any):
        super().__init__(key=key)
        if args:
            self["args"] = args


def catalog_dir() -> Path | None:
    """The directory holding ``<lang>.<part>.toml``: the wheel's copy, else the checkout's."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "i18n", here.parents[1] / "content" / "i18n"):
        if any(candidate.glob(f"*.{PARTS[0]}.toml")):
            return candidate
    return None


def languages() -> tuple[str, ...]:
    """Every language with string files, sorted (empty when none were found)."""
    root = catalog_dir()
    if root is None:
        return ()
    return tuple(sorted(p.name.split(".")[0] for p in root.glob(f"*.{PARTS[0]}.toml")))


def _flatten(table: dict, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@functools.lru_cache(maxsize=None)
def strings(lang: str) -> dict[str, str]:
    """The flattened strings of ``lang`` (empty when there are none)."""
    root = catalog_dir()
    out: dict[str, str] = {}
    if root is None:
        return out
    for part in PARTS:
        out.update(part_strings(lang, part))
    return out


@functools.lru_cache(maxsize=None)
def part_strings(lang: str, part: str) -> dict[str, str]:
    """The flattened strings of one part of ``lang`` (the figure kit reads only ``figwrap``)."""
    root = catalog_dir()
    path = root / f"{lang}.{part}.toml" if root is not None else None
    if path is None or not path.is_file():
        return {}
    return _flatten(tomllib.loads(path.read_text(encoding="utf-8")))


def option(control: str, value: Any) -> Text:
    """A choice of a select as a message names it: its label ``opt.<control>.<value>`` on the page
    (messages name option labels, never keys); the command lines, which print only the messages'
    own strings, name it as typed there (``as_typed``: the option's value)."""
    def part(s: Any) -> str:
        return str(s).replace("-", "_")
    return Text(f"opt.{part(control)}.{part(value)}", as_typed=str(value))


def joined(cells: list) -> Any:
    """Several cells as one list cell ("a, b, c"; the separator is ``list.more`` of the language)."""
    out = cells[-1]
    for cell in reversed(cells[:-1]):
        out = Text("list.more", first=cell, rest=out)
    return out


def text(cell: Any, lang: str = DEFAULT_LANG) -> str:
    """A cell as text in ``lang``; a key without a string shows as the key (never a traceback:
    this runs inside ``str(error)``; the build and the tests make sure every key exists), or as
    its ``as_typed`` argument where it has one (an option, :func:`option`)."""
    if isinstance(cell, dict) and "key" in cell:
        args = cell.get("args") or {}
        template = strings(lang).get(cell["key"])
        if template is None:
            if "as_typed" in args:
                return text(args["as_typed"], lang)
            template = cell["key"]
        return PLACEHOLDER.sub(lambda m: text(args[m.group(1)], lang) if m.group(1) in args else m.group(0),
                               template)
    return "" if cell is None else str(cell)

