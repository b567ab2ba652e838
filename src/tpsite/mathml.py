"""LaTeX formulas in Markdown -> MathML at build time (no JavaScript for math).

``$…$`` is inline math, ``$$…$$`` display math; ``\\$`` is a literal dollar sign.
Formulas are cut out of the Markdown *before* Markdown runs (so ``_`` and ``*`` inside
them are not emphasis), skipping fenced code blocks and inline code spans, and replaced
by placeholder tokens that :func:`restore` swaps for the MathML afterwards.

latex2mathml has gaps this module closes:

* ``aligned`` is not supported (it emits a bare ``<mi>&</mi>``): it is rewritten to
  ``align*``, which produces an ``<mtable>`` of right/left column pairs.  Chromium's
  MathML Core ignores ``columnalign``, so such tables get ``class="tp-align"`` and the
  stylesheet aligns the cells (``text-align`` on ``mtd``).
* Unknown commands come out as ``<mi>\\foo</mi>`` and unknown environments vanish
  silently: both are build errors, as is anything that is not well-formed XML, a stray
  ``&`` and a ``\\\\`` line break outside an environment (Chromium would ignore it).
* ``mathvariant`` other than ``normal`` is ignored by MathML Core, so ``\\mathbf`` & co.
  are mapped to the Unicode mathematical alphanumeric characters.

Every ``<math>`` carries ``alttext`` (its LaTeX source) for screen readers; display math
gets ``display="block"``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from latex2mathml.converter import convert as _l2m_convert

from .errors import BuildError

NS = "http://www.w3.org/1998/Math/MathML"
ET.register_namespace("", NS)

TOKEN = "MXTPMATH{:05d}Z"
TOKEN_RE = re.compile(r"MXTPMATH(\d{5})Z")

# Environments latex2mathml converts (plus ``aligned``, which we rewrite).
ENVIRONMENTS = {
    "matrix", "matrix*", "pmatrix", "pmatrix*", "bmatrix", "bmatrix*", "Bmatrix", "Bmatrix*",
    "vmatrix", "vmatrix*", "Vmatrix", "Vmatrix*", "array", "substack", "cases", "displaylines",
    "eqalign", "eqalignno", "smallmatrix", "split", "align", "align*", "aligned",
}
ENV_RE = re.compile(r"\\(begin|end)\s*\{([^}]*)\}")

# Unicode mathematical alphanumerics: (capital A, small a, digit 0) per mathvariant;
# None = no such block.  Holes of the blocks (letters that live in the BMP) below.
_ALPHA = {
    "bold": (0x1D400, 0x1D41A, 0x1D7CE),
    "italic": (0x1D434, 0x1D44E, None),
    "bold-italic": (0x1D468, 0x1D482, 0x1D7CE),
    "sans-serif": (0x1D5A0, 0x1D5BA, 0x1D7E2),
    "bold-sans-serif": (0x1D5D4, 0x1D5EE, 0x1D7EC),
    "monospace": (0x1D670, 0x1D68A, 0x1D7F6),
    "script": (0x1D49C, 0x1D4B6, None),
    "fraktur": (0x1D504, 0x1D51E, None),
    "double-struck": (0x1D538, 0x1D552, 0x1D7D8),
}
_HOLES = {
    ("italic", "h"): "\u210E",
    ("script", "B"): "\u212C", ("script", "E"): "\u2130", ("script", "F"): "\u2131",
    ("script", "H"): "\u210B", ("script", "I"): "\u2110", ("script", "L"): "\u2112",
    ("script", "M"): "\u2133", ("script", "R"): "\u211B", ("script", "e"): "\u212F",
    ("script", "g"): "\u210A", ("script", "o"): "\u2134",
    ("fraktur", "C"): "\u212D", ("fraktur", "H"): "\u210C", ("fraktur", "I"): "\u2111",
    ("fraktur", "R"): "\u211C", ("fraktur", "Z"): "\u2128",
    ("double-struck", "C"): "\u2102", ("double-struck", "H"): "\u210D",
    ("double-struck", "N"): "\u2115", ("double-struck", "P"): "\u2119",
    ("double-struck", "Q"): "\u211A", ("double-struck", "R"): "\u211D",
    ("double-struck", "Z"): "\u2124",
}


class MathError(ValueError):
    """A formula that cannot be converted (the caller adds file and line)."""


@dataclass(frozen=True)
class Formula:
    """One formula found in a page."""

    latex: str
    display: bool
    line: int


def _styled(text: str, variant: str) -> str | None:
    """``text`` in the Unicode alphabet of ``variant``; None if a character has none."""
    upper, lower, digit = _ALPHA[variant]
    out = []
    for ch in text:
        if (variant, ch) in _HOLES:
            out.append(_HOLES[(variant, ch)])
        elif "A" <= ch <= "Z":
            out.append(chr(upper + ord(ch) - 65))
        elif "a" <= ch <= "z":
            out.append(chr(lower + ord(ch) - 97))
        elif "0" <= ch <= "9" and digit is not None:
            out.append(chr(digit + ord(ch) - 48))
        else:
            return None
    return "".join(out)


def _check_environments(latex: str) -> str:
    """Reject unknown environments and rewrite ``aligned`` to ``align*``."""
    for m in ENV_RE.finditer(latex):
        if m.group(2).strip() not in ENVIRONMENTS:
            raise MathError(f"unsupported environment {{{m.group(2)}}} (supported: aligned, "
                            "align*, split, array, cases, *matrix)")
    return ENV_RE.sub(lambda m: f"\\{m.group(1)}{{align*}}" if m.group(2).strip() == "aligned"
                      else m.group(0), latex)


def _tag(el: ET.Element) -> str:
    return el.tag.rsplit("}", 1)[-1]


OPEN_FENCES = set("([{|\u2016\u27e8\u230a\u2308")
CLOSE_FENCES = set(")]}|\u2016\u27e9\u230b\u2309")
# \max_{…} & co. take limits below in display style (TeX's \limits for these operators).
LIMIT_OPERATORS = {"max", "min", "sup", "inf", "lim", "limsup", "liminf", "argmax", "argmin", "det", "Pr"}
FUNCTION_NAMES = {"log", "ln", "exp", "sin", "cos", "tan", "tanh", "sinh", "cosh", "lg", "arg", "dim", "ker"}
LARGE_OPERATORS = set("\u2211\u220f\u2210\u222b\u222c\u222e\u22c3\u22c2")
THIN = "0.1667em"


def _mk(tag: str, attrib: dict | None = None) -> ET.Element:
    return ET.Element(f"{{{NS}}}{tag}", attrib or {})


def _restructure(parent: ET.Element) -> None:
    """MathML Core fixes that need the parent: fences, limits, operator-name spacing."""
    kids = list(parent)
    # [ mtable ] as siblings inside a longer row: a fence only stretches when it is the first
    # (prefix) or last (postfix) child of its row, so group the three in their own <mrow>.
    for i in range(1, len(kids) - 1):
        a, m, b = kids[i - 1], kids[i], kids[i + 1]
        if (_tag(m) == "mtable" and _tag(a) == "mo" and _tag(b) == "mo"
                and (a.text or "") in OPEN_FENCES and (b.text or "") in CLOSE_FENCES
                and not (i - 1 == 0 and i + 1 == len(kids) - 1)):
            pos = list(parent).index(a)
            row = _mk("mrow")
            for el in (a, m, b):
                parent.remove(el)
                row.append(el)
            parent.insert(pos, row)
    kids = list(parent)
    for i, el in enumerate(kids):
        tag = _tag(el)
        if tag == "msub" and len(el) == 2 and _tag(el[0]) == "mo" and (el[0].text or "") in LIMIT_OPERATORS:
            el.tag = f"{{{NS}}}munder"
            el[0].set("movablelimits", "true")
        if tag in ("munder", "munderover", "msub", "msubsup") and len(el) and _tag(el[0]) == "mo" \
                and ((el[0].text or "") in LIMIT_OPERATORS or (el[0].text or "") in LARGE_OPERATORS):
            el[0].set("lspace", "0")   # after '=' TeX adds one thick space, not two
        nxt = kids[i + 1] if i + 1 < len(kids) else None
        if tag == "mi" and (el.text or "") in FUNCTION_NAMES and nxt is not None and not (
                _tag(nxt) == "mo" and (nxt.text or "") in OPEN_FENCES | {"\u2061"}):
            # TeX puts a thin space between \log and its argument (log s, not logs).
            parent.insert(list(parent).index(el) + 1, _mk("mspace", {"width": THIN}))
        if tag == "mo" and (el.text or "") == "/":
            el.set("lspace", "0")      # TeX's / is an ordinary symbol: no space around it
            el.set("rspace", "0")


BARS = {"\u00af", "\u203e", "\u2012", "\u2015"}     # macron, overline and the dashes latex2mathml may give


def _fix_tree(root: ET.Element) -> None:
    """Validate the converted tree and adapt it to MathML Core (Chromium)."""
    for parent in list(root.iter()):
        _restructure(parent)
    for el in root.iter():
        tag = _tag(el)
        text = el.text or ""
        if "\\" in text:
            raise MathError(f"unknown LaTeX command '{text.strip()}'")
        if tag in ("mi", "mo", "mn") and text.strip() == "&":
            raise MathError("stray '&' outside an alignment environment (use aligned or align*)")
        if tag == "mspace" and el.get("linebreak") == "newline":
            raise MathError("'\\\\' line break outside an environment: wrap the lines in "
                            "\\begin{aligned} … \\end{aligned}")
        if tag == "mover" and len(el) == 2 and _tag(el[0]) == "mi" and _tag(el[1]) == "mo" \
                and (el[1].text or "") in BARS:
            # \bar f: latex2mathml writes a stretchy, non-accent over-script, which Chromium
            # draws as a short dash above the letter's top-left corner.  As an accent (TeX's
            # \bar is one) it sits over the letter: f̄ and ḡ name the site's operators.
            el.set("accent", "true")
            el[1].attrib.pop("stretchy", None)
        if tag == "mtable" and (el.get("columnspacing") or "").startswith("0em"):
            el.set("class", "tp-align")        # align*/aligned/split: right/left column pairs
        variant = el.get("mathvariant")
        if variant in _ALPHA and tag in ("mi", "mn", "mtext") and text:
            styled = _styled(text, variant)
            if styled is not None:
                el.text = styled
                del el.attrib["mathvariant"]
                if tag == "mi" and len(styled) > 1:
                    el.set("mathvariant", "normal")   # multi-letter mi is upright anyway


def latex_to_mathml(latex: str, display: bool) -> str:
    """Convert one formula; raise :class:`MathError` when it cannot be done properly."""
    source = latex.strip()
    if not source:
        raise MathError("empty formula")
    prepared = _check_environments(source)
    try:
        raw = _l2m_convert(prepared, display="block" if display else "inline")
    except Exception as err:  # latex2mathml raises many unrelated exception types
        detail = str(err).strip()
        raise MathError(f"cannot convert '{source}': {type(err).__name__}"
                        + (f" ({detail})" if detail else "")) from None
    if re.search(r"<m[ion]>&</m[ion]>", raw):
        raise MathError(f"stray '&' outside an alignment environment (use aligned or align*) in '{source}'")
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as err:
        raise MathError(f"'{source}' gives invalid MathML ({err})") from None
    try:
        _fix_tree(root)
    except MathError as err:
        raise MathError(f"{err} in '{source}'") from None
    root.set("display", "block" if display else "inline")
    root.set("alttext", " ".join(source.split()))
    return ET.tostring(root, encoding="unicode", short_empty_elements=True)


# ---------------------------------------------------------------- extraction

def _is_fence(line: str) -> str | None:
    """The fence marker if ``line`` opens/closes a fenced code block."""
    m = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
    return m.group(1) if m else None


def _blocks(text: str):
    """Yield (is_code, chunk, first_line) with fenced code blocks kept apart."""
    lines = text.splitlines(keepends=True)
    start, buf, fence, i = 1, [], None, 0
    for i, line in enumerate(lines, 1):
        marker = _is_fence(line)
        if fence is None and marker:
            if buf:
                yield False, "".join(buf), start
            buf, start, fence = [line], i, marker
        elif fence is not None and marker and marker[0] == fence[0] and len(marker) >= len(fence) \
                and not line.strip()[len(marker):].strip():
            buf.append(line)
            yield True, "".join(buf), start
            buf, start, fence = [], i + 1, None
        else:
            buf.append(line)
    if buf:
        yield fence is not None, "".join(buf), start


def extract(text: str, path, first_line: int = 1) -> tuple[str, list[Formula]]:
    """Replace every formula in ``text`` by a token; return the new text and the formulas.

    Raises :class:`BuildError` (file:line) for an unmatched or malformed ``$``.
    """
    if TOKEN_RE.search(text):
        raise BuildError("text contains the reserved placeholder 'MXTPMATH…Z'", path)
    formulas: list[Formula] = []
    out: list[str] = []
    for is_code, chunk, start in _blocks(text):
        if is_code:
            out.append(chunk)
            continue
        out.append(_extract_chunk(chunk, path, first_line + start - 1, formulas))
    return "".join(out), formulas


def _extract_chunk(chunk: str, path, line0: int, formulas: list[Formula]) -> str:
    out: list[str] = []
    i, n = 0, len(chunk)

    def line_at(pos: int) -> int:
        return line0 + chunk.count("\n", 0, pos)

    while i < n:
        ch = chunk[i]
        if ch == "\\" and i + 1 < n and chunk[i + 1] == "$":
            out.append("&#36;")
            i += 2
        elif ch == "\\" and i + 1 < n:
            out.append(chunk[i:i + 2])
            i += 2
        elif ch == "`":
            run = len(chunk[i:]) - len(chunk[i:].lstrip("`"))
            close = chunk.find("`" * run, i + run)
            while close != -1 and close + run < n and chunk[close + run] == "`":
                close = chunk.find("`" * run, close + run + 1)
            if close == -1:
                out.append(chunk[i:i + run])
                i += run
            else:
                out.append(chunk[i:close + run])
                i = close + run
        elif ch == "$":
            display = chunk.startswith("$$", i)
            delim = "$$" if display else "$"
            body_start = i + len(delim)
            close = _find_close(chunk, body_start, delim)
            if close == -1:
                raise BuildError(f"unmatched '{delim}' (write \\$ for a dollar sign)", path, line_at(i))
            latex = chunk[body_start:close]
            if not display and (latex[:1].isspace() or latex[-1:].isspace()):
                raise BuildError(f"inline math '${latex}$' must not start or end with a space "
                                 "(write \\$ for a dollar sign)", path, line_at(i))
            if not display and "\n\n" in latex:
                raise BuildError("inline math spans a paragraph break", path, line_at(i))
            formulas.append(Formula(latex=latex, display=display, line=line_at(i)))
            out.append(TOKEN.format(len(formulas) - 1))
            i = close + len(delim)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _find_close(chunk: str, start: int, delim: str) -> int:
    """Index of the closing delimiter (not escaped); -1 if there is none."""
    i = start
    while True:
        j = chunk.find(delim, i)
        if j == -1:
            return -1
        if chunk[j - 1] == "\\" and (j - 2 < start or chunk[j - 2] != "\\"):
            i = j + 1
            continue
        if delim == "$" and chunk.startswith("$$", j):
            return -1 if j == start else j
        return j


def convert_all(formulas: list[Formula], path) -> list[str]:
    """MathML of every formula; the first failure is a BuildError at its line."""
    out = []
    for f in formulas:
        try:
            out.append(latex_to_mathml(f.latex, f.display))
        except MathError as err:
            raise BuildError(str(err), path, f.line) from None
    return out


# Chromium may break a line on either side of an inline <math> (an atomic inline), even before
# "，" or "）" -- a word joiner (U+2060) does not hold against it -- so "，" could start a line
# after a formula.  A formula, the closing punctuation right after it and the opening brackets
# right before it are therefore one no-wrap span (style.css .nobr); the line still breaks
# before or after the span.  A formula that is a whole definition (``[$f$]{dfn=f}``) is glued
# with its <dfn> (a span inside the dfn could not hold the punctuation after it).
OPENING = "（「『【《〈“‘(["
CLOSING = "。，、；：！？）」』】》〉”’.,;:!?)]"
GLUED_RE = re.compile(f"([{re.escape(OPENING)}]*)"
                      f"(<dfn id=\"[a-z0-9-]+\">MXTPMATH(\\d{{5}})Z</dfn>|MXTPMATH(\\d{{5}})Z)"
                      f"([{re.escape(CLOSING)}]*)")


def _glue(m: re.Match, mathml: list[str]) -> str:
    index = int(m.group(3) or m.group(4))
    if not (m.group(1) or m.group(5)) or ' display="block"' in mathml[index][:120]:
        return m.group(0)
    return f'<span class="nobr">{m.group(0)}</span>'


def restore(html: str, mathml: list[str]) -> str:
    """Put the MathML back; a display formula alone in a paragraph becomes a block."""
    def block(m: re.Match) -> str:
        html = mathml[int(m.group(1))]
        return f'<div class="math-display">{html}</div>' if ' display="block"' in html[:120] else m.group(0)

    html = re.sub(r"<p>\s*MXTPMATH(\d{5})Z\s*</p>", block, html)
    html = GLUED_RE.sub(lambda m: _glue(m, mathml), html)
    return TOKEN_RE.sub(lambda m: mathml[int(m.group(1))], html)
