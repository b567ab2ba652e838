"""LaTeX -> MathML: conversion, rejection of what cannot be converted, extraction from
Markdown (line numbers, code skipped), and alignment of multi-line formulas in Chromium."""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tpsite import BuildError  # noqa: E402
from tpsite.mathml import MathError, convert_all, extract, latex_to_mathml, restore  # noqa: E402

NS = "{http://www.w3.org/1998/Math/MathML}"
ROOT = Path(__file__).resolve().parents[1]


def tree(mathml: str) -> ET.Element:
    return ET.fromstring(mathml)


def texts(el: ET.Element, tag: str) -> list[str]:
    return [e.text or "" for e in el.iter(NS + tag)]


# ---------------------------------------------------------------- conversion

def test_inline_and_display():
    inline = tree(latex_to_mathml(r"Y = XW", display=False))
    assert inline.get("display") == "inline" and inline.get("alttext") == "Y = XW"
    block = tree(latex_to_mathml(r"L=\sum Y\odot G", display=True))
    assert block.get("display") == "block"
    assert block.get("alttext") == r"L=\sum Y\odot G"
    assert "\u2299" in texts(block, "mo") and "\u2211" in texts(block, "mo")


def test_aligned_becomes_an_aligned_table():
    latex = r"\begin{aligned} a&=b+c,\\ d&=e.\end{aligned}"
    m = tree(latex_to_mathml(latex, display=True))
    tables = list(m.iter(NS + "mtable"))
    assert len(tables) == 1 and tables[0].get("class") == "tp-align"
    rows = list(tables[0])
    assert len(rows) == 2
    for row, (left, right) in zip(rows, (("a", "b"), ("d", "e"))):
        cells = list(row)
        assert [c.get("columnalign") for c in cells] == ["right", "left"]
        assert texts(cells[0], "mi") == [left]
        assert texts(cells[1], "mo")[0] == "="          # rows meet at '='
        assert right in texts(cells[1], "mi")
    assert "&" not in "".join(m.itertext())
    assert m.get("alttext") == latex


def test_aligned_with_two_column_pairs():
    m = tree(latex_to_mathml(r"\begin{aligned}a&=b & c&=d\\ e&=f & g&=h\end{aligned}", True))
    for row in m.iter(NS + "mtr"):
        assert [c.get("columnalign") for c in row] == ["right", "left", "right", "left"]


def test_seed_formula_with_nested_matrix():
    latex = (r"\begin{aligned}W_1&=[W_{1a}\;W_{1b}],\quad W_2=\begin{bmatrix}W_{2a}\\W_{2b}"
             r"\end{bmatrix},\\H_a&=\phi(XW_{1a}),\quad H_b=\phi(XW_{1b}),\\Y&=H_aW_{2a}+H_bW_{2b}."
             r"\end{aligned}")
    m = tree(latex_to_mathml(latex, True))
    outer = next(m.iter(NS + "mtable"))
    assert outer.get("class") == "tp-align" and len(list(outer)) == 3
    # the matrix's brackets are the first/last children of their own row, so they stretch
    rows = [r for r in m.iter(NS + "mrow") if len(r) == 3 and r[1].tag == NS + "mtable"]
    assert len(rows) == 1
    assert (rows[0][0].text, rows[0][2].text) == ("[", "]")


def test_split_and_cases_and_array():
    for latex in (r"\begin{split}a&=b\\&=c\end{split}", r"f=\begin{cases}1&x>0\\0&\text{else}\end{cases}",
                  r"\begin{array}{rl}a&=b\\c&=d\end{array}", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}"):
        m = tree(latex_to_mathml(latex, True))
        assert list(m.iter(NS + "mtable"))
        assert "&" not in "".join(m.itertext())


def test_mathbf_uses_unicode_bold():
    m = tree(latex_to_mathml(r"\mathbf{1}[y\in V_r] + \mathbf{W}", False))
    assert "\U0001D7CF" in texts(m, "mn")          # MATHEMATICAL BOLD DIGIT ONE
    assert "\U0001D416" in texts(m, "mi")          # MATHEMATICAL BOLD CAPITAL W
    assert not any(e.get("mathvariant") == "bold" for e in m.iter())


def test_limits_and_function_spacing():
    m = tree(latex_to_mathml(r"m=\max_{j} z_j,\quad L=\log s", True))
    under = list(m.iter(NS + "munder"))
    assert len(under) == 1 and under[0][0].text == "max" and under[0][0].get("movablelimits") == "true"
    parent = next(p for p in m.iter() if any(c.text == "log" for c in p))
    kids = list(parent)
    i = next(i for i, c in enumerate(kids) if c.text == "log")
    assert kids[i + 1].tag == NS + "mspace" and kids[i + 2].text == "s"   # log, thin space, s


@pytest.mark.parametrize("latex, message", [
    (r"\foo{", "cannot convert"),
    (r"\foo x", r"unknown LaTeX command '\\foo' in '\\foo x'"),
    (r"\frac{a}{", "cannot convert"),
    (r"x^{", "cannot convert"),
    (r"\left( x", "cannot convert"),
    (r"\begin{foo} a \end{foo}", "unsupported environment {foo}"),
    (r"a &= b", "'&'"),
    (r"a \\ b", "line break"),
    ("", "empty formula"),
])
def test_unconvertible_latex_is_an_error(latex, message):
    with pytest.raises(MathError, match=message if message.startswith("unknown") else None) as info:
        latex_to_mathml(latex, True)
    assert message.replace("\\\\", "\\") in str(info.value)


def test_no_bare_ampersand_ever():
    """Whatever latex2mathml does with '&', our output never contains <mi>&</mi>."""
    for latex in (r"a & b", r"\begin{aligned}a&=b\end{aligned}", r"x \& y"):
        try:
            out = latex_to_mathml(latex, True)
        except MathError:
            continue
        assert "<mi>&amp;</mi>" not in out and "<mi>&</mi>" not in out
        tree(out)  # well-formed


# ---------------------------------------------------------------- extraction from Markdown

def test_extract_positions_and_code():
    text = ("Intro $a+b$ and \\$5 costs.\n"          # line 1
            "\n"
            "```python\n"                              # line 3
            "x = '$not math$'\n"
            "```\n"
            "Inline `code $x$` then $c$.\n"            # line 6
            "$$\n"                                     # line 7
            "\\begin{aligned}a&=b\\\\c&=d\\end{aligned}\n"
            "$$\n"
            "End $d$.\n")                               # line 10
    out, formulas = extract(text, "page.md")
    assert [(f.latex, f.display, f.line) for f in formulas] == [
        ("a+b", False, 1), ("c", False, 6),
        ("\n\\begin{aligned}a&=b\\\\c&=d\\end{aligned}\n", True, 7), ("d", False, 10)]
    assert "x = '$not math$'" in out and "`code $x$`" in out
    assert "&#36;5" in out
    assert out.count("MXTPMATH") == 4


def test_extract_line_offset_and_errors():
    _, formulas = extract("\n\n$x$\n", "p.md", first_line=5)
    assert formulas[0].line == 7
    with pytest.raises(BuildError) as info:
        extract("ok\n\nprice $5 and more\n\nnext para\n", "p.md", first_line=10)
    assert (info.value.path, info.value.line) == ("p.md", 12)
    with pytest.raises(BuildError) as info:
        extract("a\n$$x\n", "p.md")
    assert info.value.line == 2 and "'$$'" in str(info.value)
    with pytest.raises(BuildError, match="must not start or end with a space"):
        extract("a $ x $ b\n", "p.md")


def test_convert_all_reports_file_and_line():
    _, formulas = extract("one $a$\ntwo\nthree $\\foo$\n", "content/en/x.md")
    with pytest.raises(BuildError) as info:
        convert_all(formulas, "content/en/x.md")
    assert str(info.value).startswith("content/en/x.md:3: unknown LaTeX command")


def test_restore_block_and_inline():
    _, formulas = extract("$$a$$\n\nx $b$ y\n", "p.md")
    html = "<p>MXTPMATH00000Z</p>\n<p>x MXTPMATH00001Z y</p>"
    out = restore(html, convert_all(formulas, "p.md"))
    assert out.startswith('<div class="math-display"><math ')
    assert '<p>x <math xmlns="http://www.w3.org/1998/Math/MathML" display="inline"' in out


# ---------------------------------------------------------------- Chromium layout

CHROMIUM = "/usr/bin/chromium"


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")
def test_aligned_rows_line_up_in_chromium(tmp_path, browser):
    """Chromium ignores columnalign: the stylesheet must make every '=' start at the same x,
    and right-align the left-hand sides (so they end at the same x)."""
    formulas = [
        r"\begin{aligned}W_1&=[W_{1a}\;W_{1b}],\quad W_2=\begin{bmatrix}W_{2a}\\W_{2b}\end{bmatrix},\\"
        r"H_a&=\phi(XW_{1a}),\\Y&=H_aW_{2a}+H_bW_{2b}.\end{aligned}",
        r"\begin{aligned}m_r&=\max_{j\in V_r}z_j,\\\frac{\partial L}{\partial z_j}&=e^{z_j-m}/s-\mathbf1[j=y].\end{aligned}",
    ]
    body = "".join(f'<div class="math-display">{latex_to_mathml(f, True)}</div>' for f in formulas)
    css = (ROOT / "templates" / "static" / "style.css").read_text(encoding="utf-8")
    page = tmp_path / "math.html"
    (tmp_path / "style.css").write_text(css, encoding="utf-8")
    page.write_text(f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                    f'<link rel="stylesheet" href="style.css"></head><body>{body}</body></html>',
                    encoding="utf-8")
    # The session's Chromium (tests/conftest.py): a second sync_playwright in one process fails.
    tab = browser.new_page()
    try:
        tab.goto(page.as_uri())
        geometry = tab.evaluate("""() => [...document.querySelectorAll('mtable.tp-align')].map(t =>
            [...t.children].map(tr => {
              const [lhs, rhs] = tr.children;
              const eq = [...rhs.querySelectorAll('mo')].find(m => m.textContent === '=');
              const kids = [...lhs.children].map(k => k.getBoundingClientRect());
              return {eq: eq.getBoundingClientRect().left,
                      lhsRight: Math.max(...kids.map(r => r.right)),
                      lhsLeft: Math.min(...kids.map(r => r.left)),
                      cellLeft: lhs.getBoundingClientRect().left};
            }))""")
    finally:
        tab.close()
    assert len(geometry) == 2
    for rows in geometry:
        eqs = [r["eq"] for r in rows]
        ends = [r["lhsRight"] for r in rows]
        assert max(eqs) - min(eqs) < 1.0, eqs          # the '=' signs line up
        assert max(ends) - min(ends) < 1.0, ends       # left-hand sides are right-aligned
        # a narrow left-hand side really moved right (text-align alone does nothing in Chromium)
        narrow = min(rows, key=lambda r: r["lhsRight"] - r["lhsLeft"])
        assert narrow["lhsLeft"] - narrow["cellLeft"] > 3


def test_punctuation_never_starts_a_line_after_inline_maths():
    """A formula, the closing punctuation after it and the opening brackets before it are one
    no-wrap span, so Chromium cannot break the line between them ("。" starting a line: a word
    joiner does not hold against an atomic inline <math>); a formula without punctuation and a
    display formula are left alone (tests/test_rendering_browser.py measures the lines)."""
    from tpsite import mathml as mm
    a, b = "<math><mi>a</mi></math>", '<math display="inline"><mi>b</mi></math>'
    block = '<math display="block"><mi>c</mi></math>'
    html = mm.restore("<p>宽度 MXTPMATH00000Z。然后（MXTPMATH00001Z）, MXTPMATH00000Z, and MXTPMATH00001Z x"
                      "</p><p>MXTPMATH00002Z</p><p>so MXTPMATH00002Z.</p>", [a, b, block])
    assert f'<span class="nobr">{a}。</span>' in html
    assert f'<span class="nobr">（{b}）,</span>' in html
    assert f'<span class="nobr">{a},</span> and {b} x' in html
    assert f'<div class="math-display">{block}</div>' in html
    assert f"so {block}." in html
    assert "\u2060" not in html
    css = (ROOT / "templates" / "static" / "style.css").read_text(encoding="utf-8")
    assert re.search(r"\.nobr\s*\{\s*white-space:\s*nowrap", css)


def test_a_bar_over_one_letter_is_an_accent():
    """\\bar f (the operator f̄) as an accent over-script: Chromium centres an accent over its
    base; latex2mathml's stretchy non-accent bar is drawn as a short dash at the top-left."""
    from tpsite.mathml import latex_to_mathml
    out = latex_to_mathml(r"\bar f + \bar g", display=False)
    assert out.count('<mover accent="true"><mi>f</mi><mo>¯</mo></mover>') == 1, out
    assert '<mover accent="true"><mi>g</mi><mo>¯</mo></mover>' in out, out
    assert "stretchy" not in out
    wide = latex_to_mathml(r"\overline{AB}", display=False)     # a bar over more than one letter stays
    assert '<mover accent="true">' not in wide
