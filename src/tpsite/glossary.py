"""The site's glossary (content/i18n/glossary.toml): one term per concept, checked and shown.

Every term has its English and Chinese form and, per language, the variants that must not
appear in that language's content.  :func:`check` stops the build at the first forbidden
variant, naming file:line; :func:`rows` is the table the pages show (the glossary section of
the first page, linked from every page's footer).
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


@dataclass(frozen=True)
class Term:
    en: str
    zh: str
    forbid: dict[str, tuple[str, ...]] = field(default_factory=dict)    # lang -> variants
    allow: dict[str, tuple[str, ...]] = field(default_factory=dict)     # lang -> right longer strings


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
        terms.append(Term(t["en"], t["zh"], lists["forbid"], lists["allow"]))
    return tuple(terms)


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
