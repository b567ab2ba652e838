"""The site's glossary (content/i18n/glossary.toml): one term per concept, checked and shown.

Every term has its English and Chinese form and, per language, the variants that must not
appear in that language's content.  :func:`check` stops the build at the first forbidden
variant, naming file:line; :func:`rows` is the table the pages show (the glossary section of
the first page, linked from every page's footer).

A term may also list the concepts a page must define before it uses them (``[[term.track]]``:
an ``id`` and, per language, the spellings that count as a use).  The Markdown marks a
definition ``[text]{dfn=ID}`` (:mod:`tpsite.markdown_ext`: ``<dfn id="dfn-ID">``), a use links to
it with ``#dfn-ID``; ``benchmarks/reading.py`` reports the terms a page uses before either.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BuildError

FILE = "glossary.toml"
ANCHOR = "glossary"          # the section's id on the first page (the footer links to it)
_WORD = re.compile(r"[A-Za-z0-9]+")
TRACK_ID = re.compile(r"[a-z0-9][a-z0-9-]*")     # the dfn's id is "dfn-" + this (an HTML id, a URL anchor)


@dataclass(frozen=True)
class Tracked:
    """A concept a page defines before it uses it.  ``spellings``: lang -> the strings that count
    as a use ("$…$": an inline formula with that LaTeX, see benchmarks/reading.py)."""
    id: str
    spellings: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class Term:
    en: str
    zh: str
    forbid: dict[str, tuple[str, ...]] = field(default_factory=dict)    # lang -> variants
    allow: dict[str, tuple[str, ...]] = field(default_factory=dict)     # lang -> right longer strings
    track: tuple[Tracked, ...] = ()                                      # the concepts defined before use


def _shown(path: Path) -> str:
    from .content import display_path       # content imports nothing from here
    return display_path(path)


def load(i18n_dir: Path) -> tuple[Term, ...]:
    """The terms, in file order (none when the content has no glossary file)."""
    path = Path(i18n_dir) / FILE
    if not path.is_file():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise BuildError(f"invalid TOML: {err}", _shown(path), getattr(err, "lineno", None)) from None
    terms = []
    for i, t in enumerate(data.get("term", [])):
        if not (isinstance(t.get("en"), str) and isinstance(t.get("zh"), str)):
            raise BuildError(f"term {i + 1} needs the strings 'en' and 'zh'", _shown(path))
        lists = {}
        for part in ("forbid", "allow"):
            table = t.get(part, {})
            if not (isinstance(table, dict) and all(isinstance(v, list) and all(isinstance(s, str) and s for s in v)
                                                    for v in table.values())):
                raise BuildError(f"term {t['en']!r}: '{part}' must map a language to a list of strings",
                                 _shown(path))
            lists[part] = {lang: tuple(v) for lang, v in table.items()}
        terms.append(Term(t["en"], t["zh"], lists["forbid"], lists["allow"], _tracked(t, path)))
    ids = [k.id for term in terms for k in term.track]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise BuildError(f"tracked term ids used twice: {twice}", _shown(path))
    return tuple(terms)


def _tracked(t: dict, path: Path) -> tuple[Tracked, ...]:
    out = []
    for k in t.get("track", []):
        if not (isinstance(k, dict) and isinstance(k.get("id"), str) and TRACK_ID.fullmatch(k["id"])):
            raise BuildError(f"term {t['en']!r}: each [[term.track]] needs an 'id' of a-z, 0-9 and '-'",
                             _shown(path))
        spellings = {key: v for key, v in k.items() if key != "id"}   # the languages
        if not all(isinstance(v, list) and v and all(isinstance(s, str) and s for s in v)
                   for v in spellings.values()):
            raise BuildError(f"tracked term {k['id']!r}: each language maps to a list of spellings",
                             _shown(path))
        out.append(Tracked(k["id"], {lang: tuple(v) for lang, v in spellings.items()}))
    return tuple(out)


def tracked(terms: tuple[Term, ...]) -> tuple[Tracked, ...]:
    """Every concept the pages define before use, in file order."""
    return tuple(k for t in terms for k in t.track)


def files_of(root: Path, lang: str) -> list[Path]:
    """Everything a reader of ``lang`` reads that the content holds: the pages, the string
    tables (the figures', controls', errors' and command lines' text), the demo copies."""
    root = Path(root)
    out = sorted((root / lang).glob("*.md"))
    out += sorted(p for p in (root / "i18n").glob(f"{lang}*.toml")
                  if p.name == f"{lang}.toml" or p.name.startswith(f"{lang}."))
    out += sorted((root / "demos" / lang).glob("*.py"))
    return out


def _found(variant: str, line: str) -> bool:
    if _WORD.fullmatch(variant):             # a word: not inside another one ("id" in "hidden")
        return re.search(rf"(?<![A-Za-z0-9_]){re.escape(variant)}(?![A-Za-z0-9_])", line) is not None
    return variant in line


def problems(root: Path, terms: tuple[Term, ...], langs: tuple[str, ...]) -> list[tuple[str, int, str, Term]]:
    """(file, line, variant, term) of every forbidden variant in the content of ``langs``."""
    out = []
    for lang in langs:
        rules = [(t, v) for t in terms for v in t.forbid.get(lang, ())]
        if not rules:
            continue
        allowed = [a for t in terms for a in t.allow.get(lang, ())]
        for path in files_of(root, lang):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for a in allowed:
                    line = line.replace(a, " ")
                out += [(_shown(path), n, v, t) for t, v in rules if _found(v, line)]
    return out


def check(root: Path, langs: tuple[str, ...]) -> tuple[Term, ...]:
    """The glossary, after making sure no content of ``langs`` uses a variant it forbids."""
    terms = load(Path(root) / "i18n")
    found = problems(root, terms, langs)
    if found:
        path, line, variant, term = found[0]
        more = f" ({len(found) - 1} more)" if len(found) > 1 else ""
        raise BuildError(f"{variant!r} is not the glossary's term for {term.en!r}: write {term.zh!r} "
                         f"(content/i18n/{FILE}){more}", path, line)
    return terms


def rows(terms: tuple[Term, ...]) -> list[dict]:
    """The table the pages show: English, Chinese, and the Chinese variants not used."""
    return [{"en": t.en, "zh": t.zh, "avoid": "、".join(t.forbid.get("zh", ()))} for t in terms]
