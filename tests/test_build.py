"""The builder: fixture content and the real content, built into temporary directories.

Checks the page chrome (lang, hreflang both ways, language switch, toc, CSP, no inline
script or style), formulas (MathML, aligned tables, no stray & or $), determinism, the
demo DOM contract against the view sections' declarations, and that bad content fails
with file:line while the previous site stays intact.
"""

from __future__ import annotations

import json
import shutil
import zipfile
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from html_tree import as_tree, parse
from site_fixture import DEMO, ROOT, make_content, tree_hashes
from tpsite import BuildError
from tpsite.build import build

HTML_LANG = {"en": "en", "zh": "zh-CN"}   # the tags content/i18n/<lang>.site.toml gives


def _flat_toml(path: Path, prefix: str = "") -> dict[str, str]:
    """A string file read with the standard library's TOML parser: {dotted key: string}."""
    def flat(data, prefix):
        out = {}
        for k, v in data.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
        return out
    return flat(tomllib.loads(path.read_text(encoding="utf-8")), prefix)


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory) -> tuple[Path, Path, dict]:
    base = tmp_path_factory.mktemp("fixture")
    content = make_content(base / "content")
    out = base / "site"
    result = build(out, content_dir=content, runtime="none")
    return content, out, result


@pytest.fixture(scope="module")
def real_site(static_site) -> Path:
    return static_site          # conftest.py: one --runtime none build of the real content per run


def pages_of(site: Path) -> list[Path]:
    return sorted(site.glob("*/*.html")) + [site / "index.html"]


def raw_prose(html: str) -> str:
    """The HTML source without code, pre, script and math elements: a '$' left there
    would be an unconverted formula delimiter (an escaped \\$ is written as &#36;)."""
    for tag in ("pre", "code", "script", "math"):
        html = re.sub(rf"<{tag}[\s>].*?</{tag}>", "", html, flags=re.S)
    return html


# ---------------------------------------------------------------- structure and chrome

def test_fixture_site_layout(fixture_site):
    _, out, result = fixture_site
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert names == ["404.html", "en/contents.html", "en/index.html", "en/row-parallel.html", "index.html",
                     "zh/contents.html", "zh/index.html", "zh/row-parallel.html"]
    assert (out / "static" / "style.css").is_file()
    assert (out / "static" / "lang.js").is_file()
    assert result["pages"] == 8
    assert set(result["timings"]) >= {"content", "math", "views", "markdown", "render"}
    assert all(v >= 0 for v in result["timings"].values())
    assert not list(out.parent.glob(".site.tmp-*")), "temporary build directory left behind"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_chrome(fixture_site, lang):
    content, out, _ = fixture_site
    doc = parse((out / lang / "index.html").read_text(encoding="utf-8"))
    html = doc.find("html")
    assert html.attrs["lang"] == HTML_LANG[lang]
    assert html.attrs["data-runtime"] == "loading"
    alternates = {l.attrs["hreflang"]: l.attrs["href"] for l in doc.find_all("link", rel="alternate")}
    assert alternates == {"en": "../en/index.html", "zh-CN": "../zh/index.html",
                          "x-default": "../index.html"}
    switches = [a for a in doc.find_all("a") if "lang-switch" in a.classes()]
    other = "zh" if lang == "en" else "en"
    assert [a.attrs["href"] for a in switches] == [f"../{other}/index.html"]
    assert switches[0].attrs["hreflang"] == HTML_LANG[other]
    # nav: the contents page, then page 1 and page 2, current page marked
    nav = doc.find("nav", class_="site-nav")
    links = {a.attrs["href"]: a.attrs.get("aria-current") for a in nav.find_all("a")}
    assert links == {"contents.html": None, "index.html": "page", "row-parallel.html": None}
    # toc lists the headings by id; every heading has a permalink
    toc = doc.find("nav", class_="toc toc-side")
    assert [a.attrs["href"] for a in toc.find_all("a")] == ["#mlp", "#table", "#vocab"]
    # ... and again, folded (details/summary: no script) for narrow screens
    fold = doc.find("nav", class_="toc toc-fold")
    assert [a.attrs["href"] for a in fold.find("details").find_all("a")] == ["#mlp", "#table", "#vocab"]
    assert fold.find("summary").text() == toc.find("h2").text()
    for hid in ("mlp", "table", "vocab"):
        heading = doc.find(id=hid)
        assert heading.tag in ("h2", "h3")
        assert heading.find("a", href=f"#{hid}") is not None
    # i18n data, runtime meta, scripts, footer
    # inline: only what the scripts show before a result; the rest is the language's strings file
    inline = json.loads(doc.find("script", id="tp-i18n").text())
    assert inline["site.run"] and inline["runtime.ready"] and "label.fixture" not in inline
    assert all(k.startswith(("runtime.", "site.")) for k in inline)
    strings_url = doc.find("meta", name="tp-strings").attrs["content"]
    assert strings_url.startswith(f"../static/i18n/{lang}.") and strings_url.endswith(".json")
    strings = json.loads((out / lang / strings_url).read_text(encoding="utf-8"))
    assert strings["label.fixture"] and strings["site.run"] == inline["site.run"]
    fixture_strings = {}
    for f in sorted((content / "i18n").glob(f"{lang}*.toml")):
        fixture_strings.update(_flat_toml(f))
    assert strings == fixture_strings       # every key of the language, nothing else
    assert doc.find("meta", name="tp-pyodide").attrs["content"] == ""
    assert doc.find("meta", name="tp-wheel").attrs["content"] == ""
    srcs = [s.attrs.get("src") for s in doc.find_all("script")]
    assert "../static/app.js" in srcs
    assert doc.find("script", src="../static/app.js").attrs.get("type") == "module"   # deferred, strict
    assert doc.find("footer") is not None


def test_hreflang_pairs_are_mutual(fixture_site):
    _, out, _ = fixture_site
    for page in sorted(out.glob("*/*.html")):
        doc = parse(page.read_text(encoding="utf-8"))
        for link in doc.find_all("link", rel="alternate"):
            if link.attrs["hreflang"] == "x-default":
                continue
            target = (page.parent / link.attrs["href"]).resolve()
            assert target.is_file(), (page, link.attrs)
            back = parse(target.read_text(encoding="utf-8"))
            hrefs = {(target.parent / l.attrs["href"]).resolve() for l in back.find_all("link", rel="alternate")}
            assert page.resolve() in hrefs, f"{target} does not link back to {page}"


def test_language_choice_page(fixture_site):
    _, out, _ = fixture_site
    doc = parse((out / "index.html").read_text(encoding="utf-8"))
    choices = {a.attrs["data-lang"]: a.attrs["href"] for a in doc.find_all("a") if "lang-choose" in a.classes()}
    assert choices == {"en": "en/index.html", "zh": "zh/index.html"}
    assert doc.find("script", src="static/lang.js") is not None
    alternates = {l.attrs["hreflang"]: l.attrs["href"] for l in doc.find_all("link", rel="alternate")}
    assert alternates == {"en": "en/index.html", "zh-CN": "zh/index.html", "x-default": "index.html"}


@pytest.mark.parametrize("mode", ["none", "cdn"])
def test_no_inline_script_or_style_and_csp(tmp_path, mode):
    content = make_content(tmp_path / "content")
    out = tmp_path / "site"
    build(out, content_dir=content, runtime=mode)
    for page in pages_of(out):
        text = page.read_text(encoding="utf-8")
        doc = parse(text)
        for script in doc.find_all("script"):
            assert "src" in script.attrs or script.attrs.get("type") == "application/json", page
        assert doc.find("style") is None
        assert not re.search(r"\sstyle=", text), page
        assert not re.search(r"\son[a-z]+=", text), page
        csp = doc.find("meta", http_equiv="Content-Security-Policy").attrs["content"]
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
        assert directives["default-src"] == "'self'"
        assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
        if mode == "cdn" and page.parent.name in ("en", "zh") and page.name != "contents.html":   # it runs no Python
            assert "https://cdn.jsdelivr.net" in directives["script-src"]
            assert "'wasm-unsafe-eval'" in directives["script-src"]
        if mode == "none":
            assert "cdn.jsdelivr.net" not in csp
    if mode == "cdn":
        doc = parse((out / "en" / "index.html").read_text(encoding="utf-8"))
        assert doc.find("meta", name="tp-pyodide").attrs["content"].startswith("https://cdn.jsdelivr.net/pyodide/")
        wheel = doc.find("meta", name="tp-wheel").attrs["content"]
        assert wheel.startswith("../static/") and wheel.endswith(".whl")
        assert (out / "en" / wheel).resolve().is_file()


# ---------------------------------------------------------------- formulas

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_formulas_become_mathml(fixture_site, lang):
    _, out, _ = fixture_site
    text = (out / lang / "index.html").read_text(encoding="utf-8")
    doc = parse(text)
    maths = doc.find_all("math")
    # 3 inline in the intro/table + 2 display formulas
    assert len([m for m in maths if m.attrs["display"] == "inline"]) == 3
    display = [m for m in maths if m.attrs["display"] == "block"]
    assert len(display) == 2
    for m in maths:
        assert m.attrs["alttext"].strip()
    assert display[0].attrs["alttext"].startswith(r"\begin{aligned}")
    for m in display:
        assert m.parent.tag == "div" and "math-display" in m.parent.classes()
        table = m.find("mtable", class_="tp-align")
        assert table is not None
        for row in table.element_children():
            cells = row.element_children()
            assert [c.attrs["columnalign"] for c in cells] == ["right", "left"]
            # the '=' starts the left-aligned cell: that is where the rows align
            first_mo = cells[1].find("mo")
            assert first_mo.text() == "="
    assert len(display[0].find("mtable", class_="tp-align").element_children()) == 3
    assert "<mi>&amp;</mi>" not in text and "<mi>&</mi>" not in text
    assert "$" not in raw_prose(text)
    assert "MXTPMATH" not in text and "MXTPSHORT" not in text
    # the escaped dollar is a literal dollar sign; dollars in code are untouched
    assert "$5" in doc.find("main").text()
    assert 'cost = ' in doc.find("div", class_="highlight").text()
    assert "a $b$ c" in [c.text() for c in doc.find_all("code")]


def test_markdown_tables_are_semantic(fixture_site):
    _, out, _ = fixture_site
    doc = parse((out / "en" / "index.html").read_text(encoding="utf-8"))
    table = doc.find("main").find("table")
    assert table.parent.tag == "div" and "table-wrap" in table.parent.classes()
    assert table.find("caption").text() == "Values per rank"
    assert all(th.attrs.get("scope") == "col" for th in table.find("thead").find_all("th"))


def test_long_inline_code_gets_break_points_and_code_blocks_do_not():
    """A long name in inline code may break after "/", before "_" / "." and at a camelCase step
    (else overflow-wrap cuts it anywhere, often right before the "，" that follows); the text is
    unchanged, and a code block is left alone."""
    from tpsite.markdown_ext import to_html
    html, _ = to_html("See `tensor_parallel/cross_entropy.py`（`_VocabParallelCrossEntropy`）：`a_b`.\n\n"
                      "<p><code>megatron/core/x.py</code></p>\n\n```text\nlong_module/name_here.py\n```\n", "#")
    assert "<code>tensor<wbr>_parallel/<wbr>cross<wbr>_entropy<wbr>.py</code>" in html
    assert "<code>_Vocab<wbr>Parallel<wbr>Cross<wbr>Entropy</code>" in html     # no break before a leading _
    assert "<code>a_b</code>" in html                                         # short names stay whole
    assert "<code>megatron/<wbr>core/<wbr>x<wbr>.py</code>" in html              # raw HTML (references) too
    assert "long_module/name_here.py" in html                                 # code block untouched
    doc = parse(html)
    assert [c.text() for c in doc.find_all("code")][:2] == ["tensor_parallel/cross_entropy.py",
                                                           "_VocabParallelCrossEntropy"]


def test_header_breaks_keep_words_whole():
    """Chinese headers break only between words (style.css keep-all); a Latin term keeps its
    full-width gloss (word joiner) and the particle 的 may end a line (zero-width space)."""
    from tpsite.content import header_breaks
    assert header_breaks("rank（卡）", "的") == "rank\u2060（卡）"
    assert header_breaks("与未分片参考的最大绝对误差", "的") == "与未分片参考的\u200b最大绝对误差"
    assert header_breaks("完整的 Transformer 层", "的") == "完整的 Transformer 层"   # a space breaks already
    assert header_breaks("Max abs error (vs reference)", "") == "Max abs error (vs reference)"


def test_pydemo_block(fixture_site):
    _, out, _ = fixture_site
    for lang, label in (("en", "Run"), ("zh", "运行")):
        doc = parse((out / lang / "index.html").read_text(encoding="utf-8"))
        demo = doc.find("div", class_="pydemo")
        button = demo.find("button")
        assert button.attrs["type"] == "button" and "pydemo-run" in button.classes()
        assert button.attrs["data-demo"] == "hello" and button.text() == label
        source = demo.find("textarea", class_="pydemo-code").text()
        assert source == "\n" + DEMO      # the parser drops the newline after <textarea>
        # the output shown is what running the program prints
        expected = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True).stdout
        assert demo.find("pre", class_="pydemo-output").text() == expected == "sum = 6\n"
        assert demo.find("div", class_="highlight").text().strip() == source.strip()


# ---------------------------------------------------------------- determinism

def test_two_builds_are_byte_identical(tmp_path):
    content = make_content(tmp_path / "content")
    build(tmp_path / "a", content_dir=content, runtime="cdn")
    build(tmp_path / "b", content_dir=content, runtime="cdn")
    a, b = tree_hashes(tmp_path / "a"), tree_hashes(tmp_path / "b")
    assert a == b
    assert len(a) > 5


def test_rebuild_replaces_site(tmp_path):
    content = make_content(tmp_path / "content")
    out = tmp_path / "site"
    build(out, content_dir=content, runtime="none")
    (out / "stale.html").write_text("old")
    build(out, content_dir=content, runtime="none")
    assert not (out / "stale.html").exists(), "the site must be written from scratch"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["content", "site"]


# ---------------------------------------------------------------- bad content

def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


BAD_CASES = {
    "broken front matter": lambda c: (_edit(c / "zh/index.md", 'order = 1', 'order = = 1'),
                                      ("zh/index.md", _line_of(c / "zh/index.md", "order = ="))),
    "unclosed front matter": lambda c: ((c / "en/index.md").write_text("+++\ntitle = \"x\"\n\nbody\n"),
                                        ("en/index.md", 1)),
    "unknown LaTeX command": lambda c: (_edit(c / "en/index.md", r"$L=\sum", r"$L=\foo"),
                                        ("en/index.md", _line_of(c / "en/index.md", r"\foo"))),
    "unbalanced LaTeX": lambda c: (_edit(c / "zh/index.md", r"s&=\sum_r s_r.", r"s&=\frac{s_r}{"),
                                   ("zh/index.md", _line_of(c / "zh/index.md", r"\frac{s_r}{"))),
    "unknown environment": lambda c: (_edit(c / "en/index.md", r"$Y=\phi(XW_1)W_2$", r"$\begin{foo}x\end{foo}$"),
                                      ("en/index.md", _line_of(c / "en/index.md", "begin{foo}"))),
    "stray ampersand": lambda c: (_edit(c / "en/index.md", r"$Y=\phi(XW_1)W_2$", r"$a&=b$"),
                                  ("en/index.md", _line_of(c / "en/index.md", "$a&=b$"))),
    "unmatched dollar": lambda c: (_edit(c / "en/index.md", "## Vocab", "Costs $5\n\n## Vocab"),
                                   ("en/index.md", _line_of(c / "en/index.md", "Costs $5"))),
    "missing string key": lambda c: (_edit(c / "i18n/zh.toml", "fixture =", "# fixture ="),
                                     ("i18n/zh.toml", None)),
    "duplicate string key": lambda c: ((c / "i18n/en.extra.toml").write_text('[label]\nfixture = "again"\n'),
                                       ("i18n/en.extra.toml", None)),
    # a key in one language only names the file where it is missing (the counterpart of its own)
    "string key in one language only": lambda c: (
        (c / "i18n/en.errors.toml").write_text('[error]\nbad = "Bad {value}"\n'), ("i18n/zh.errors.toml", None)),
    "placeholders differ across languages": lambda c: (
        (c / "i18n/en.errors.toml").write_text('[error]\nbad = "Bad {value}"\n'),
        (c / "i18n/zh.errors.toml").write_text('[error]\nbad = "错 {valeur}"\n'), ("i18n/zh.errors.toml", None))[1:],
    "missing translation": lambda c: ((c / "en/extra.md").write_text('+++\ntitle = "Extra"\n+++\n\nText.\n'),
                                      ("zh/extra.md", None)),
    "shortcode inside a paragraph": lambda c: (_edit(c / "en/index.md", "{{pydemo hello}}", "Text\n{{pydemo hello}}"),
                                               ("en/index.md", _line_of(c / "en/index.md", "{{pydemo hello}}"))),
    "failing Python demo": lambda c: ((c / "demos/hello.py").write_text("raise SystemExit(3)\n"),
                                      ("demos/hello.py", None)),
    "missing Python demo": lambda c: (_edit(c / "en/index.md", "{{pydemo hello}}", "{{pydemo nope}}"),
                                      ("en/index.md", _line_of(c / "en/index.md", "{{pydemo nope}}"))),
    "unknown demo section": lambda c: (_edit(c / "zh/index.md", "{{pydemo hello}}", "{{demo no-such-section}}"),
                                       ("zh/index.md", _line_of(c / "zh/index.md", "{{demo no-such"))),
    "demo value for no control": lambda c: (_edit(c / "zh/index.md", "{{pydemo hello}}", "{{demo mlp colour=red}}"),
                                            ("zh/index.md", _line_of(c / "zh/index.md", "{{demo mlp colour"))),
    "demo value the section refuses": lambda c: (_edit(c / "en/index.md", "{{pydemo hello}}", "{{demo mlp tp=3}}"),
                                                 ("en/index.md", _line_of(c / "en/index.md", "{{demo mlp tp=3"))),
    "values on a pydemo": lambda c: (_edit(c / "en/index.md", "{{pydemo hello}}", "{{pydemo hello x=1}}"),
                                     ("en/index.md", _line_of(c / "en/index.md", "{{pydemo hello x=1"))),
    # tables=folded is the one option that is not a control, for a {{demo}} only, with that one value
    "tables option on a pydemo": lambda c: (_edit(c / "en/index.md", "{{pydemo hello}}", "{{pydemo hello tables=folded}}"),
                                            ("en/index.md", _line_of(c / "en/index.md", "{{pydemo hello tables"))),
    "tables option with another value": lambda c: (_edit(c / "zh/index.md", "{{pydemo hello}}", "{{demo mlp tables=open}}"),
                                                   ("zh/index.md", _line_of(c / "zh/index.md", "{{demo mlp tables=open"))),
    # a figure is drawn once, in its demo block (issue 27): the old {{figure NAME}} is refused
    "figure shortcode": lambda c: (_edit(c / "en/index.md", "{{pydemo hello}}", "{{figure mlp}}"),
                                   ("en/index.md", _line_of(c / "en/index.md", "{{figure mlp}}"))),
    "heading ids differ": lambda c: (_edit(c / "zh/index.md", "{#vocab}", "{#vocabulary}"),
                                     ("zh/index.md", None)),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_content_fails_with_location_and_keeps_site(tmp_path, case):
    content = make_content(tmp_path / "content")
    out = tmp_path / "site"
    build(out, content_dir=content, runtime="none")
    before = tree_hashes(out)
    _, (rel, line) = BAD_CASES[case](content)
    with pytest.raises(BuildError) as info:
        build(out, content_dir=content, runtime="none")
    err = info.value
    assert err.path is not None and Path(err.path).as_posix().endswith(rel), (case, str(err))
    if line is not None:
        assert err.line == line, (case, str(err))
        assert str(err).startswith(f"{err.path}:{line}: ")
    assert tree_hashes(out) == before, "a failed build must leave the previous site intact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["content", "site"], "temporary directory left"


def test_cli_reports_build_error(tmp_path):
    content = make_content(tmp_path / "content")
    _edit(content / "en/index.md", r"$L=\sum", r"$L=\foo{")
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--content", str(content), "--out",
                           str(tmp_path / "site"), "--runtime", "none"], capture_output=True, text=True)
    assert proc.returncode == 1
    line = _line_of(content / "en/index.md", r"\foo{")
    assert re.search(rf"en/index\.md:{line}: ", proc.stderr), proc.stderr
    assert not (tmp_path / "site").exists()


# ---------------------------------------------------------------- the real content

def test_real_site_languages_and_contract(real_site):
    """Every {{demo}} of the real pages renders the tables and values its section declares."""
    sys.path.insert(0, str(ROOT / "src"))
    from tpmath import views

    sections = views.sections()
    content_pages = sorted((ROOT / "content" / "en").glob("*.md"))
    assert content_pages
    for md in content_pages:
        names = re.findall(r"^\{\{demo ([\w-]+)[^}]*\}\}\s*$", md.read_text(encoding="utf-8"), re.M)
        for lang in ("en", "zh"):
            page = real_site / lang / f"{md.stem}.html"
            text = page.read_text(encoding="utf-8")
            doc = parse(text)
            assert doc.find("html").attrs["lang"] == HTML_LANG[lang]
            assert "<mi>&amp;</mi>" not in text and "MXTPMATH" not in text
            assert "$" not in raw_prose(text), page
            for name in names:
                demo = doc.find("div", id=f"demo-{name}")
                assert demo is not None and demo.attrs["data-section"] == name
                form = demo.find("form", class_="controls")
                assert form.attrs["data-section"] == name
                fields = [el for el in form.iter() if el.tag in ("select", "input")]
                controls = {el.attrs["name"] for el in fields if "name" in el.attrs}
                assert controls == {c.name for c in sections[name].controls}
                # the only unnamed fields are sliders, each tied to a named control of its form
                sliders = [el for el in fields if "name" not in el.attrs]
                assert all(el.attrs.get("type") == "range" and el.attrs["data-for"] in controls for el in sliders)
                assert {el.attrs["data-for"] for el in sliders} == {c.name for c in sections[name].controls if c.slider}
                assert form.find("output", class_="control-msg").attrs["aria-live"] == "polite"
                assert demo.find("p", class_="runtime-status") is not None
                tables = {t.attrs["data-table"]: t for t in demo.find_all("table") if "data-table" in t.attrs}
                assert set(sections[name].tables) <= set(tables), (page, name)
                values = {d.attrs["data-value"] for d in demo.find_all("dd")}
                assert set(sections[name].values) <= values, (page, name)
                for table in tables.values():
                    assert all(th.attrs.get("scope") == "col" for th in table.find("thead").find_all("th"))
                    for body in ("tbody", "tfoot"):
                        part = table.find(body)
                        for tr in part.element_children() if part else []:   # not a grid cell's rows
                            first = tr.element_children()[0]
                            assert first.tag == "th" and first.attrs.get("scope") == "row"


DEMO_LINE = re.compile(r"^\{\{demo ([\w-]+)((?: [\w-]+=\S+?)*)\}\}\s*$", re.M)


@pytest.mark.parametrize("slug", ["index", "row-parallel"])
def test_real_site_defaults_match_views(real_site, slug):
    """The static tables show exactly the view functions' cells for the default controls, or the
    values the page's shortcode gives ({{demo collectives collective=all-reduce}} on page 2)."""
    sys.path.insert(0, str(ROOT / "src"))
    from tpmath import views

    md = (ROOT / "content" / "en" / f"{slug}.md").read_text(encoding="utf-8")
    demos = [(m.group(1), dict(pair.split("=", 1) for pair in m.group(2).split() if not pair.startswith("tables=")))
             for m in DEMO_LINE.finditer(md)]      # tables=folded: how the tables show, not a control
    assert demos, f"page {slug} must have its demos"
    doc = parse((real_site / "en" / f"{slug}.html").read_text(encoding="utf-8"))
    checked = 0
    for name, given in demos:
        result = views.render(name, given or None, "en")
        demo = doc.find("div", id=f"demo-{name}")
        form = demo.find("form", class_="controls")
        for key, value in given.items():      # the form opens on the given values
            el = next(e for e in form.iter() if e.attrs.get("name") == key)
            shown = el.find("option", selected=True) if el.tag == "select" else el
            assert shown.attrs["value"] == value
        for tname, spec in result["tables"].items():
            table = demo.find("table", data_table=tname)
            body = table.find("tbody").element_children()
            assert len(body) == len(spec["rows"])
            for tr, row in zip(body, spec["rows"]):
                for cell_el, cell in zip(tr.element_children(), row):
                    if isinstance(cell, str):
                        assert cell_el.text() == cell
                        checked += 1
                    elif "el" in cell:     # a grid or a rank tag: the same elements, attributes and numbers
                        assert [as_tree(k) for k in cell_el.element_children()] == [cell["el"]]
                        checked += 1
        for vname, value in result["values"].items():
            if isinstance(value, str):
                assert demo.find("dd", data_value=vname).text() == value
                checked += 1
    assert checked > 20


FOLDED_LINE = re.compile(r"^\{\{demo ([\w-]+)[^}]* tables=folded[^}]*\}\}\s*$", re.M)


def _fold_summaries(lang: str) -> tuple[str, str]:
    """The summary lines of a fold, straight from the string files: (many with {n}, one)."""
    strings = _flat_toml(ROOT / "content" / "i18n" / f"{lang}.site.toml")
    return strings["site.tables_fold"], strings["site.tables_fold_one"]


@pytest.mark.parametrize("slug", ["index", "row-parallel", "transformer-layer", "sequence-parallel"])
def test_folded_tables_sit_under_the_figure_with_their_count(real_site, slug):
    """{{demo NAME tables=folded}}: every table of the demo, and nothing else, in one closed
    details.tables-fold after its figures and values; its summary counts them; the other demos
    have no fold; both languages fold the same demos."""
    folded = {lang: FOLDED_LINE.findall((ROOT / "content" / lang / f"{slug}.md").read_text(encoding="utf-8"))
              for lang in ("en", "zh")}
    assert folded["en"] == folded["zh"]
    for lang in ("en", "zh"):
        many, one = _fold_summaries(lang)
        doc = parse((real_site / lang / f"{slug}.html").read_text(encoding="utf-8"))
        for demo in doc.find_all("div", class_="demo"):
            folds = [el for el in demo.element_children() if el.tag == "details" and "tables-fold" in el.classes()]
            name = demo.attrs["data-section"]
            if name not in folded[lang]:
                assert not folds and not demo.find_all("details", class_="tables-fold"), (lang, slug, name)
                continue
            assert len(folds) == 1 and "open" not in folds[0].attrs, (lang, slug, name)
            fold = folds[0]
            tables = [t for t in demo.find_all("table") if "data-table" in t.attrs]
            assert tables and all(t in fold.find_all("table") for t in tables), (lang, slug, name)
            summary = fold.element_children()[0]
            assert summary.tag == "summary" and not summary.element_children()    # no nested control
            assert summary.text() == (one if len(tables) == 1 else many.format(n=len(tables)))
            # what carries the idea comes first and stays out: the figures, the values, the notes
            kids = demo.element_children()
            at = kids.index(fold)
            assert any(k.tag == "figure" for k in kids[:at]), (lang, slug, name)
            assert not fold.find_all("figure") and not fold.find_all("dl") and not fold.find_all(data_note=True)


def test_the_collectives_demos_open_on_all_reduce():
    """The MLP (page 1) and the row-parallel layer (page 2) communicate with AllReduce: their
    collectives demos open on it (the section's default, AlltoAll, is one choice away)."""
    for lang in ("en", "zh"):
        for page in ("index", "row-parallel"):
            md = (ROOT / "content" / lang / f"{page}.md").read_text(encoding="utf-8")
            assert re.search(r"^\{\{demo collectives collective=all-reduce\}\}$", md, re.M), (lang, page)


def test_real_site_is_deterministic(real_site, tmp_path):
    """Same input, byte-identical output: the real pages plus the tpmath wheel (cdn mode)."""
    build(tmp_path / "a", runtime="cdn")
    build(tmp_path / "b", runtime="cdn")
    a, b = tree_hashes(tmp_path / "a"), tree_hashes(tmp_path / "b")
    assert a == b
    assert any(name.endswith(".whl") for name in a)
    # the HTML does not depend on the runtime mode except for the runtime meta and CSP
    for name, digest in tree_hashes(real_site).items():
        if name.endswith(".css") or name.endswith(".js"):
            assert a[name] == digest, name


def test_demo_sources_share_their_code_across_languages():
    """content/demos/<lang>/NAME.py is a translation: the same code (comments and strings aside)
    and, run, the same numbers."""
    import io
    import tokenize

    def code_tokens(path):
        skip = {tokenize.COMMENT, tokenize.NL, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)}
        toks = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
        return [(t.type, t.string) for t in toks if t.type not in skip]

    def numbers(path):
        out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True).stdout
        return re.findall(r"-?\d+(?:\.\d+)?", out)

    pairs = 0
    for path in sorted((ROOT / "content" / "demos").glob("*/*.py")):
        base = ROOT / "content" / "demos" / path.name
        assert base.is_file(), f"{path} translates no demo"
        assert code_tokens(path) == code_tokens(base), path
        assert numbers(path) == numbers(base), path
        pairs += 1
    assert pairs >= 1


# ---------------------------------------------------------------- a third language

def test_a_third_language_is_content_files_only(tmp_path):
    """Copy the English content as language "xx" (pages and every string file, with its own tag):
    the build succeeds, writes site/xx/ with the same pages in that language's files, lists it on
    the language choice, and the command-line messages travel in the wheel for it too."""
    content = tmp_path / "content"
    shutil.copytree(ROOT / "content", content)
    shutil.copytree(content / "en", content / "xx")
    for path in sorted((content / "i18n").glob("en*.toml")):
        text = path.read_text(encoding="utf-8").replace('lang_tag = "en"', 'lang_tag = "x-test"')
        (content / "i18n" / ("xx" + path.name[2:])).write_text(text, encoding="utf-8")
    out = tmp_path / "site"
    build(out, content_dir=content, runtime="none")
    en = sorted(p.name for p in (out / "en").iterdir())
    assert sorted(p.name for p in (out / "xx").iterdir()) == en and "index.html" in en
    for name in en:
        html = (out / "xx" / name).read_text(encoding="utf-8")
        assert '<html lang="x-test"' in html and 'hreflang="x-test"' in html
        # the same page as English but for its own language's links and tag
        english = (out / "en" / name).read_text(encoding="utf-8")
        assert html.replace("x-test", "en").replace("../xx/", "../en/").count("<table") == english.count("<table")
    assert 'href="xx/index.html"' in (out / "index.html").read_text(encoding="utf-8")
    with zipfile.ZipFile(next((out / "download").glob("*.whl"))) as zf:
        assert "tpmath/i18n/xx.errors.toml" in zf.namelist()


def test_the_page_knows_which_drawing_the_stylesheet_shows():
    """js/apply.js makes the shown one of a figure's two drawings equal to its tree first: its
    phone breakpoint must be the stylesheet's, where fig-narrow replaces fig-wide."""
    css = (ROOT / "templates" / "static" / "style.css").read_text(encoding="utf-8")
    js = (ROOT / "templates" / "static" / "js" / "apply.js").read_text(encoding="utf-8")
    swap = re.search(r"@media (\([^)]*\)) \{\s*\.tp-figure \.fig-wide \{ display: none; \}", css)
    phone = re.search(r'const PHONE = "([^"]*)"', js)
    assert swap and phone and swap.group(1) == phone.group(1), (swap, phone)


def test_a_citation_and_the_punctuation_after_it_do_not_part():
    """A citation link is an atomic inline: "[6]" then a line starting with "。" (issue 25 item 2,
    found after the maths fix).  The link and its closing punctuation are one no-wrap span."""
    from tpsite.markdown_ext import cite_glue
    html = ('<p>见 <a aria-label="参考资料 6" class="cite" href="#ref-6">[6]</a>。下一句'
            '<a class="cite" href="#ref-2">[2]</a>）；<a class="cite" href="#ref-3">[3]</a> 后</p>')
    out = cite_glue(html)
    assert '<span class="nobr"><a aria-label="参考资料 6" class="cite" href="#ref-6">[6]</a>。</span>' in out
    assert '<span class="nobr"><a class="cite" href="#ref-2">[2]</a>）；</span>' in out
    assert '<a class="cite" href="#ref-3">[3]</a> 后' in out          # nothing to hold: left alone
