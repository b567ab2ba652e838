"""Read all content before anything is rendered.

Layout::

    content/<lang>/<slug>.md        +++ TOML front matter +++ then Markdown
    content/i18n/<lang>.toml        nested TOML, keys used flattened with dots
    content/i18n/<lang>.*.toml      more strings for <lang>, merged (a key twice = error);
                                    <lang>.cli.toml is the command line's help (checked, not on pages)
    content/demos/<name>.py         runnable demos ({{pydemo name}}); content/demos/<lang>/<name>.py,
                                    when present, is the page language's copy (comments, labels)

A slug present in one language must be present in every language (a translation),
and every string key must exist in every language.  Problems raise
:class:`~tpsite.errors.BuildError` naming the file (and line where there is one).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BuildError
from . import glossary

FENCE = "+++"
NON_LANG_DIRS = {"i18n", "demos"}
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
TOML_POS_RE = re.compile(r"\(at line (\d+), column \d+\)")
PLACEHOLDER = re.compile(r"\{(\w+)\}")   # what the page and tpmath.i18n fill in

CLI_PART = "cli"            # <lang>.cli.toml: the command line's help, for tpmath only (not the pages)
TAG_KEY = "site.lang_tag"   # each language's BCP 47 tag (<html lang>, hreflang) is content, like its name


@dataclass(frozen=True)
class Page:
    """One Markdown file: front matter plus body."""

    lang: str
    slug: str
    path: Path          # as shown in error messages (relative to the project when possible)
    meta: dict
    body: str
    body_line: int      # line number (1-based) of the first body line in the file

    @property
    def title(self) -> str:
        return self.meta["title"]

    @property
    def order(self) -> int:
        return self.meta.get("order", 100)

    @property
    def output_name(self) -> str:
        return f"{self.slug}.html"


@dataclass
class Content:
    """Everything the build reads, loaded and cross-checked."""

    root: Path
    langs: tuple[str, ...]
    pages: dict[tuple[str, str], Page]           # (lang, slug) -> page
    strings: dict[str, dict[str, str]]           # lang -> flattened i18n strings
    glossary: tuple = ()                         # tpsite.glossary.Term records (content/i18n/glossary.toml)

    @property
    def demos_dir(self) -> Path:
        return self.root / "demos"

    def slugs(self) -> list[str]:
        """Page slugs in navigation order (front matter ``order``, then slug)."""
        first = self.langs[0]
        pages = [p for (lang, _), p in self.pages.items() if lang == first]
        return [p.slug for p in sorted(pages, key=lambda p: (p.order, p.slug))]

    def page(self, lang: str, slug: str) -> Page:
        return self.pages[(lang, slug)]

    def tag(self, lang: str) -> str:
        """The BCP 47 tag of ``lang`` (string ``site.lang_tag`` of its content)."""
        if TAG_KEY not in self.strings[lang]:
            raise BuildError(f"missing string key {TAG_KEY!r} (the language's BCP 47 tag)",
                             display_path(self.root / "i18n" / f"{lang}.site.toml"))
        return self.strings[lang][TAG_KEY]


def display_path(path: Path) -> Path:
    """``path`` relative to the working directory when it is below it (shorter messages)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _toml_error(err: tomllib.TOMLDecodeError, path: Path, line_offset: int) -> BuildError:
    """Turn a TOML error into a BuildError at the right file line."""
    msg = str(err)
    m = TOML_POS_RE.search(msg)
    line = int(m.group(1)) + line_offset if m else None
    msg = TOML_POS_RE.sub("", msg).strip()
    return BuildError(f"invalid TOML: {msg}", path, line)


def parse_page(path: Path, lang: str) -> Page:
    """Split ``+++`` front matter from the Markdown body and validate it."""
    shown = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise BuildError(f"not UTF-8: {err}", shown) from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != FENCE:
        raise BuildError(f"must start with a '{FENCE}' front matter line", shown, 1)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == FENCE)
    except StopIteration:
        raise BuildError(f"front matter is not closed by a '{FENCE}' line", shown, 1) from None
    try:
        meta = tomllib.loads("\n".join(lines[1:end]))
    except tomllib.TOMLDecodeError as err:
        raise _toml_error(err, shown, 1) from None
    if not isinstance(meta.get("title"), str) or not meta["title"].strip():
        raise BuildError("front matter needs a non-empty string 'title'", shown, 1)
    for key, kind in (("description", str), ("order", int), ("nav", str), ("summary", str)):
        if key in meta and not isinstance(meta[key], kind):
            raise BuildError(f"front matter '{key}' must be {kind.__name__}, got {meta[key]!r}", shown, 1)
    slug = path.stem
    if not SLUG_RE.match(slug):
        raise BuildError(f"file name {path.name!r} is not a slug (a-z, 0-9, '-')", shown)
    body = "\n".join(lines[end + 1:]) + "\n"
    return Page(lang=lang, slug=slug, path=shown, meta=meta, body=body, body_line=end + 2)


def flatten(table: dict, prefix: str = "") -> dict[str, object]:
    """``{"col": {"rank": "Rank"}}`` -> ``{"col.rank": "Rank"}``."""
    out: dict[str, object] = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, full + "."))
        else:
            out[full] = value
    return out


def string_files(i18n_dir: Path, lang: str) -> list[Path]:
    """``<lang>.toml`` first, then ``<lang>.*.toml`` in name order."""
    main = i18n_dir / f"{lang}.toml"
    extra = sorted(p for p in i18n_dir.glob(f"{lang}.*.toml") if p.is_file())
    return ([main] if main.is_file() else []) + extra


def load_strings(i18n_dir: Path, lang: str) -> tuple[dict[str, str], dict[str, Path]]:
    """Merge the string files of ``lang``; a key defined twice is an error.  Returns the strings
    and the file each key comes from."""
    files = string_files(i18n_dir, lang)
    if not files:
        raise BuildError(f"no string table for language {lang!r}", display_path(i18n_dir / f"{lang}.toml"))
    merged: dict[str, str] = {}
    origin: dict[str, Path] = {}
    for path in files:
        shown = display_path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as err:
            raise _toml_error(err, shown, 0) from None
        for key, value in flatten(data).items():
            if not isinstance(value, str):
                raise BuildError(f"string {key!r} must be a TOML string, got {value!r}", shown)
            if key in merged:
                raise BuildError(f"string {key!r} is already defined in {origin[key]}", shown)
            merged[key] = value
            origin[key] = shown
    return merged, origin


def counterpart(path: Path, lang: str) -> Path:
    """The file of ``lang`` that matches another language's string file: en.errors.toml -> zh.errors.toml."""
    return path.with_name(lang + path.name[path.name.index("."):])


def check_same_keys(strings: dict[str, dict[str, str]], origins: dict[str, dict[str, Path]]) -> None:
    """Every key must exist in every language, with the same {placeholders}; an error names the
    file that lacks the key (the counterpart of the file defining it in another language)."""
    every = set().union(*(set(s) for s in strings.values()))
    for lang in sorted(strings):
        missing = sorted(every - set(strings[lang]))
        if missing:
            first = missing[0]
            where = next(origins[other][first] for other in sorted(origins) if first in origins[other])
            same_file = [k for k in missing if any(origins[o].get(k) == where for o in origins)]
            shown = ", ".join(same_file[:12]) + (" …" if len(same_file) > 12 else "")
            raise BuildError(f"{len(same_file)} string key(s) of {where} are missing here: {shown}",
                             counterpart(where, lang))
    first_lang = sorted(strings)[0]
    for lang in sorted(strings)[1:]:
        for key in sorted(strings[lang]):
            want = set(PLACEHOLDER.findall(strings[first_lang][key]))
            got = set(PLACEHOLDER.findall(strings[lang][key]))
            if got != want:
                raise BuildError(f"string {key!r} has placeholders {sorted(got)} but {sorted(want)} in "
                                 f"{origins[first_lang][key]}", origins[lang][key])


def load_content(root: Path) -> Content:
    """Read and cross-check every page and string table under ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise BuildError("content directory not found", display_path(root))
    langs = tuple(sorted(p.name for p in root.iterdir()
                         if p.is_dir() and p.name not in NON_LANG_DIRS and not p.name.startswith(".")))
    if not langs:
        raise BuildError("no language directories (content/<lang>/)", display_path(root))
    pages: dict[tuple[str, str], Page] = {}
    for lang in langs:
        for path in sorted((root / lang).glob("*.md")):
            page = parse_page(path, lang)
            pages[(lang, page.slug)] = page
    slugs = {lang: {s for (l, s) in pages if l == lang} for lang in langs}
    every = set().union(*slugs.values())
    if not every:
        raise BuildError("no pages (content/<lang>/<slug>.md)", display_path(root))
    for lang in langs:
        for slug in sorted(every - slugs[lang]):
            other = next(pages[(l, slug)] for l in langs if (l, slug) in pages)
            raise BuildError(f"missing translation of {other.path}",
                             display_path(root / lang / f"{slug}.md"))
    strings: dict[str, dict[str, str]] = {}
    origins: dict[str, dict[str, Path]] = {}
    for lang in langs:
        strings[lang], origins[lang] = load_strings(root / "i18n", lang)
    check_same_keys(strings, origins)
    # One term per concept: a forbidden variant anywhere a reader of the language reads stops the build.
    terms = glossary.check(root, langs)
    # The command line's help is checked like every string but is no page's: the pages embed
    # their strings, and these would only make them larger.
    for lang in langs:
        strings[lang] = {k: v for k, v in strings[lang].items() if origins[lang][k].name != f"{lang}.{CLI_PART}.toml"}
    return Content(root=root, langs=langs, pages=pages, strings=strings, glossary=terms)


# Chinese headings break only at spaces and punctuation (style.css: keep-all, never inside a word),
# so the page's h1, which is built here alone (the page's script never rewrites it), gets two more
# rules:
# * a Latin term and its full-width gloss are one unit ("rank" + a bracketed gloss): Chromium may
#   break before a full-width bracket, so a word joiner (U+2060, invisible) goes between them;
# * it may break after the characters of the language's ``site.break_after`` (Chinese: the
#   particle that always ends a word): a zero-width space (U+200B) marks each opportunity.
_GLOSS_RE = re.compile(r"(?<=[A-Za-z0-9])(?=[\uff08\u3010\u300c\u300a])")     # full-width (, [, corner and angle brackets


def header_breaks(text: str, after: str) -> str:
    """A heading with the two rules above applied (``after``: ``site.break_after``)."""
    text = _GLOSS_RE.sub("\u2060", text)
    if after:
        text = re.sub(f"(?<=[{re.escape(after)}])(?=[\u3400-\u9fff])", "\u200b", text)
    return text
