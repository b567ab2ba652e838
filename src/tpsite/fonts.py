"""The math font, cut down at build time to what the pages' formulas draw, as WOFF2.

Readers whose system has no math font get STIX Math from the site (``@font-face "TP Math"``
in style.css, ``font-display: swap`` so text is never hidden while it loads).  The full
OpenType file is 477 KB; the pages draw a few hundred of its 4 226 glyphs.  This module
collects every character inside the built pages' ``<math>`` elements, adds what Chromium
draws in their place (a one-letter ``<mi>`` is shown in mathematical italic:
MathML Core's ``text-transform: math-auto``), and lets fontTools keep those glyphs plus
everything the OpenType MATH and GSUB tables reach from them (stretchy-bracket variants
and assemblies, script-size alternates).  The output is deterministic: same pages, same bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from html import unescape
from pathlib import Path

from . import mathml
from .errors import BuildError

SOURCE = Path(__file__).resolve().parents[2] / "templates" / "fonts" / "STIXMath-Regular.otf"
LICENSE = SOURCE.with_name("STIXMath-LICENSE.txt")
OUTPUT = "static/fonts/tp-math.woff2"     # referenced by templates/static/style.css

# MathML Core "italic mappings" (math-auto) beyond Latin letters, which mathml._styled
# covers: Greek capitals U+0391–U+03A9 (with ϴ in the slot of U+03A2) and ∇, then the
# small Greek letters U+03B1–U+03C9 followed by ∂ ϵ ϑ ϰ ϕ ϱ ϖ.
_GREEK_CAPITALS = [chr(c) for c in range(0x391, 0x3AA)]
_GREEK_CAPITALS[0x3A2 - 0x391] = "\u03F4"
_GREEK_SMALL = [chr(c) for c in range(0x3B1, 0x3CA)] + ["\u2202", "\u03F5", "\u03D1", "\u03F0",
                                                        "\u03D5", "\u03F1", "\u03D6"]
_ITALIC = {**{ch: chr(0x1D6E2 + i) for i, ch in enumerate(_GREEK_CAPITALS + ["\u2207"])},
           **{ch: chr(0x1D6FC + i) for i, ch in enumerate(_GREEK_SMALL)},
           "\u0131": "\U0001D6A4", "\u0237": "\U0001D6A5"}


def math_italic(ch: str) -> str | None:
    """The character Chromium draws for a one-letter ``<mi>`` ``ch`` (None: drawn as is)."""
    if ch in _ITALIC:
        return _ITALIC[ch]
    if ch.isascii() and ch.isalpha():
        return mathml._styled(ch, "italic")
    return None


# Glyphs MathML layout draws that no text of the formula contains: MathML Core draws the
# radical of <msqrt> and <mroot> as U+221A from the math font (taller roots: its MATH-table
# size variants and assembly parts, which the subsetter adds once U+221A is kept).  Without
# it the subset has no radical and every square root is drawn without its sign.
IMPLIED = {"msqrt": "\u221A", "mroot": "\u221A"}

_MATH_RE = re.compile(r"<math\b.*?</math>", re.S)
_TEXT_RE = re.compile(r">([^<]+)<")
_MI_RE = re.compile(r"<mi\b([^>]*)>([^<]*)</mi>")
_TAG_RE = re.compile(r"<(m[a-z]+)\b")


def math_chars(html: str) -> set[str]:
    """Every character a page's MathML draws (as written, as auto-italicised, and implied)."""
    chars: set[str] = set()
    for fragment in _MATH_RE.findall(html):
        chars.update(IMPLIED[tag] for tag in _TAG_RE.findall(fragment) if tag in IMPLIED)
        for text in _TEXT_RE.findall(fragment):
            chars.update(ch for ch in unescape(text) if not ch.isspace())
        for attrs, text in _MI_RE.findall(fragment):
            text = unescape(text).strip()
            if len(text) == 1 and 'mathvariant="normal"' not in attrs and math_italic(text):
                chars.add(math_italic(text))
    return chars


def used_chars(site: Path) -> set[str]:
    """The characters of the MathML of every HTML page under ``site``."""
    chars: set[str] = set()
    for page in sorted(site.rglob("*.html")):
        chars |= math_chars(page.read_text(encoding="utf-8"))
    return chars


def subset_woff2(chars: set[str], source: Path = SOURCE) -> bytes:
    """``source`` cut down to ``chars`` (plus what the MATH/GSUB tables reach), WOFF2 bytes."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.flavor = "woff2"
    options.layout_features = ["*"]        # ssty (script sizes), flac, dtls …: MathML uses them
    options.name_IDs = ["*"]               # keep the copyright and licence records
    options.name_languages = ["*"]
    options.notdef_outline = True
    options.recalc_timestamp = False       # deterministic output
    options.drop_tables += ["FFTM"]        # FontForge's timestamps: not needed, not subsettable
    font = TTFont(source, recalcTimestamp=False, lazy=False)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in chars))
    subsetter.subset(font)
    buf = io.BytesIO()
    font.flavor = "woff2"
    font.save(buf, reorderTables=False)
    return buf.getvalue()


def cache_dir() -> Path:
    """Where finished subsets are kept between builds (subsetting takes ~2 s, a lookup ~0)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tp-explained" / "fonts"


def cached_subset(chars: set[str], source: Path = SOURCE) -> bytes:
    """:func:`subset_woff2`, memoised on disk by (font, characters, fontTools and brotli versions)."""
    import brotli
    import fontTools

    key = hashlib.sha256(b"\0".join([source.read_bytes(), "".join(sorted(chars)).encode(),
                                       fontTools.version.encode(), brotli.version.encode()])).hexdigest()
    path = cache_dir() / f"{source.stem}-{key[:32]}.woff2"
    if path.is_file():
        return path.read_bytes()
    data = subset_woff2(chars, source)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass                                  # a read-only cache only costs time
    return data


def install_math_font(site: Path, source: Path = SOURCE) -> dict:
    """Write the subset WOFF2 (and the font's licence) into ``site``; sizes for the build report."""
    if not source.is_file():
        raise BuildError(f"math font {source} is missing")
    chars = used_chars(site)
    data = cached_subset(chars, source)
    out = site / OUTPUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    (out.parent / LICENSE.name).write_bytes(LICENSE.read_bytes())
    return {"chars": len(chars), "bytes": len(data), "source_bytes": source.stat().st_size}
