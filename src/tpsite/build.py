"""Build the site: read everything, then render, then swap into ``site/``.

Phases (timed; :func:`build` returns the timings for benchmarks):

``content``  read every page and string table, check translations and keys
``math``     find and convert every formula (a bad one stops the build at file:line)
``views``    compute every ``{{demo}}`` through tpmath.views, run every ``{{pydemo}}``
``markdown`` Markdown -> HTML, heading ids checked equal across languages
``runtime``  Pyodide runtime files / CDN URL and the tpmath wheel (if those modules exist)
``render``   Jinja pages, static files, then the directory swap

Output (deterministic: sorted iteration, no timestamps)::

    site/index.html                   language choice (static/lang.js honours the browser)
    site/<lang>/<slug>.html           one page per content file (index.html first)
    site/<lang>/contents.html         the pages in reading order, each with its opening figure
    site/static/                      templates/static/ copied
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import jinja2

from . import content as content_mod
from . import fonts, glossary, markdown_ext, mathml, precompute, publish, render, runtime, wheel
from .content import Content, Page, display_path, header_breaks
from .errors import BuildError

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_MODES = ("local", "cdn", "none")


@dataclass
class Prepared:
    """A page between phases."""

    page: Page
    text: str = ""                                   # Markdown with math/shortcode tokens
    formulas: list = field(default_factory=list)
    mathml: list[str] = field(default_factory=list)
    shortcodes: list = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)  # rendered shortcode HTML
    html: str = ""
    toc: list = field(default_factory=list)
    figures: dict = field(default_factory=dict)     # name -> element tree, from the page's demos


class _Timer:
    def __init__(self):
        self.times: dict[str, float] = {}

    def phase(self, name: str):
        timer = self

        class _Ctx:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.times[name] = timer.times.get(name, 0.0) + time.perf_counter() - self.t0
        return _Ctx()


# ---------------------------------------------------------------- phases

def prepare_pages(content: Content) -> dict[tuple[str, str], Prepared]:
    """Cut shortcodes and formulas out of every page, convert the formulas."""
    return {key: prepare_page(content.pages[key]) for key in sorted(content.pages)}


def prepare_page(page: Page, known: dict | None = None) -> Prepared:
    """One page's shortcodes and formulas cut out, the formulas converted (``known``: MathML
    already made, by (latex, display))."""
    text, shortcodes = markdown_ext.extract_shortcodes(page.body, page.path, page.body_line)
    text, formulas = mathml.extract(text, page.path, page.body_line)
    known = known or {}
    new = [f for f in formulas if (f.latex, f.display) not in known]
    known = {**known, **dict(zip(((f.latex, f.display) for f in new), mathml.convert_all(new, page.path)))}
    return Prepared(page=page, text=text, formulas=formulas, shortcodes=shortcodes,
                    mathml=[known[(f.latex, f.display)] for f in formulas])


def _views_module():
    """tpmath.views, importable from the source tree even when not installed."""
    src = str(ROOT / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    return importlib.import_module("tpmath.views")


def compute_blocks(content: Content, prepared: dict, env, src_dir: Path, results: dict | None = None) -> None:
    """Render every demo block (the section's defaults, or the values its shortcode gives) and run
    every Python demo.

    ``results``: {(section, lang): precompute.SectionResults}; a demo block names its file."""
    views = None
    outputs: dict[Path, tuple[str, str]] = {}
    for key in sorted(prepared):
        prep = prepared[key]
        t = render.Translator(content.strings[prep.page.lang], prep.page.lang, prep.page.path)
        for sc in prep.shortcodes:
            if sc.kind == "figure":
                raise BuildError(f"{{{{figure {sc.name}}}}} is no longer a shortcode: a page draws each figure "
                                 f"once, in its {{{{demo {sc.name}}}}} block (put that where the figure belongs)",
                                 prep.page.path, sc.line)
            if sc.kind == "demo":
                if views is None:
                    views = _views_module()
                    sections = views.sections()
                if sc.name not in sections:
                    raise BuildError(f"unknown demo section {sc.name!r}; known: "
                                     f"{', '.join(sorted(sections)) or '(none)'}", prep.page.path, sc.line)
                known = {c.name for c in sections[sc.name].controls}
                unknown = [k for k, _ in sc.controls if k not in known]
                if unknown:
                    raise BuildError(f"{{{{demo {sc.name}}}}}: no control {unknown[0]!r}; its controls: "
                                     f"{', '.join(sorted(known))}", prep.page.path, sc.line)
                try:
                    result = views.render(sc.name, dict(sc.controls) or None, prep.page.lang)
                except Exception as err:
                    raise BuildError(f"view section {sc.name!r} failed: {type(err).__name__}: {err}",
                                     prep.page.path, sc.line) from err
                prep.figures.update(result.get("figures") or {})
                try:
                    done = (results or {}).get((sc.name, prep.page.lang))
                    prep.blocks.append(render.render_demo(env, sections[sc.name], result, t,
                                                          results_url="../" + done.path if done else None,
                                                          fold=sc.fold))
                except BuildError as err:
                    if err.line is not None:
                        raise
                    raise BuildError(f"{{{{demo {sc.name}}}}}: {err.message}", prep.page.path, sc.line) from None
            else:
                # content/demos/<lang>/NAME.py (comments and printed labels in the page's
                # language) when there is one, else content/demos/NAME.py.
                path = content.demos_dir / prep.page.lang / f"{sc.name}.py"
                if not path.is_file():
                    path = content.demos_dir / f"{sc.name}.py"
                if not path.is_file():
                    raise BuildError(f"Python demo {display_path(path)} not found", prep.page.path, sc.line)
                if path not in outputs:
                    code = path.read_text(encoding="utf-8")
                    outputs[path] = (code, render.run_pydemo(path, src_dir, display_path(path)))
                code, output = outputs[path]
                try:
                    prep.blocks.append(render.render_pydemo(env, sc.name, code, output, t))
                except BuildError as err:
                    raise BuildError(f"{{{{pydemo {sc.name}}}}}: {err.message}", prep.page.path, sc.line) from None


def precompute_results(content: Content, prepared: dict) -> dict:
    """Results of the discrete control states of every demo section on the pages
    (:mod:`tpsite.precompute`), walked from the values each page's demo opens with; unknown
    sections and controls are left to :func:`compute_blocks` to report."""
    starts: dict[str, set] = {}
    for prep in prepared.values():
        for sc in prep.shortcodes:
            if sc.kind == "demo":
                starts.setdefault(sc.name, set()).add(tuple(sc.controls))
    if not starts:
        return {}
    views = _views_module()
    sections = views.sections()
    usable = {}
    for name, opened in starts.items():
        if name not in sections:
            continue
        known = {c.name for c in sections[name].controls}
        usable[name] = sorted(o for o in opened if all(k in known for k, _ in o))
    return precompute.precompute(views, usable, list(content.langs))


def write_results(out: Path, results: dict) -> dict:
    """Write each results file once (a section shared by pages and languages has one);
    returns {section: {"path", "bytes", "states", "unique", "rule"}} for the build's report."""
    report = {}
    for res in {id(r): r for r in results.values()}.values():
        dest = out / res.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(res.data)
        report[res.section + (f".{res.lang}" if res.lang else "")] = {
            "path": res.path, "bytes": len(res.data), "states": res.states, "unique": res.unique,
            "rule": res.rule}
    return dict(sorted(report.items()))


# The keys the page's scripts show before any result arrives (the runtime's status, the "load it"
# button, a link's ignored values): inline in every page.  Everything else a result can name
# (column headers, notes, errors, figure labels of every section) is a separate file per language,
# about a third of a page's gzip bytes, fetched once with the first result and cached across pages.
INLINE_STRING_PREFIXES = ("runtime.", "site.")


def write_strings(out: Path, content: Content) -> dict[str, str]:
    """Write each language's strings to static/i18n/<lang>.<hash>.json; returns {lang: path}."""
    paths = {}
    for lang in content.langs:
        data = json.dumps(content.strings[lang], ensure_ascii=False, sort_keys=True,
                          separators=(",", ":")).encode("utf-8")
        path = f"static/i18n/{lang}.{hashlib.sha256(data).hexdigest()[:12]}.json"
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(data)
        paths[lang] = path
    return paths


def inline_strings(strings: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in strings.items() if k.startswith(INLINE_STRING_PREFIXES)}


def _restore_toc(tokens: list[dict], mathml_list: list[str]) -> list[dict]:
    return [{"id": tok["id"], "html": mathml.restore(tok["html"], mathml_list), "deep": tok["deep"],
             "children": _restore_toc(tok["children"], mathml_list)} for tok in tokens]


def _line_of(path, text: str) -> int | None:
    """The first line of the file ``path`` that holds ``text`` (1-based), else None."""
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if text in line:
            return n
    return None


def _check_definitions(html: str, terms: tuple, path) -> None:
    """A page defines only the glossary's tracked terms ([text]{dfn=ID}), each at most once."""
    ids = markdown_ext.dfn_ids(html)
    known = {k.id for k in glossary.tracked(terms)}
    unknown = sorted(set(ids) - known)
    if unknown:
        raise BuildError(f"{{dfn={unknown[0]}}} is not a tracked term of content/i18n/{glossary.FILE} "
                         f"([[term.track]] ids: {', '.join(sorted(known)) or 'none'})", path)
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise BuildError(f"{{dfn={twice[0]}}} marks two definitions on one page (link the second use "
                         f"to #dfn-{twice[0]})", path)


def convert_markdown(content: Content, prepared: dict, keys=None) -> None:
    """Markdown -> HTML (of the pages ``keys``, default all); heading ids must be equal across
    translations."""
    for key in sorted(prepared if keys is None else keys):
        prep = prepared[key]
        t = content.strings[prep.page.lang]
        labels = {"permalink": t.get("site.permalink_named", "{heading}"), "cite": t.get("site.cite", "[{n}]"),
                  "deep": t.get("site.deep", "Deep dive")}
        try:
            html, toc = markdown_ext.to_html(prep.text, t.get("site.permalink", "#"), labels)
        except markdown_ext.DeepError as err:
            raise BuildError(err.message, prep.page.path, _line_of(prep.page.path, "{#" + err.heading_id)) from None
        html = markdown_ext.restore_shortcodes(html, prep.blocks, prep.shortcodes, prep.page.path)
        prep.html = mathml.restore(html, prep.mathml)
        prep.toc = _restore_toc(toc, prep.mathml)
        _check_definitions(prep.html, content.glossary, prep.page.path)
    _mark_deep_links(content, prepared, keys)
    for slug in content.slugs():
        first = prepared[(content.langs[0], slug)]
        ids = markdown_ext.heading_ids(first.toc)
        for lang in content.langs[1:]:
            other = prepared[(lang, slug)]
            other_ids = markdown_ext.heading_ids(other.toc)
            if sorted(ids) != sorted(other_ids):
                only_here = sorted(set(other_ids) - set(ids))
                only_there = sorted(set(ids) - set(other_ids))
                raise BuildError(f"heading ids differ from {first.page.path} (give headings the same "
                                 f"{{#id}} in every language): only here {only_here}, only there "
                                 f"{only_there}", other.page.path)


def _mark_deep_links(content: Content, prepared: dict, keys=None) -> None:
    """Links into another section's folded deep dive (this page's or another page's) say so
    (``site.deep_link``): the pages ``keys`` (default all), against every page of their language."""
    folds = {(key[0], prep.page.output_name): markdown_ext.folded_ids(prep.html) for key, prep in prepared.items()}
    for key in sorted(prepared if keys is None else keys):
        prep, lang = prepared[key], key[0]
        mark = content.strings[lang].get("site.deep_link", " (deep dive)")
        prep.html = markdown_ext.mark_deep_links(prep.html, prep.page.output_name,
                                                 {name: ids for (l, name), ids in folds.items() if l == lang}, mark)


def install_runtime(out_dir: Path, mode: str, i18n_dir: Path) -> tuple[str | None, str | None, dict, dict, dict]:
    """Runtime files (:mod:`tpsite.runtime`) and the browser's wheel (:mod:`tpsite.wheel`).

    Returns (pyodide base URL, wheel URL, extra CSP sources, sizes); URLs relative to the site
    root or absolute, None when there is no runtime (``--runtime none``); sizes
    ``{"fetched", "download"}`` in bytes (the page's progress bar and the size it quotes);
    the worker's memory snapshot settings (:func:`tpsite.runtime.snapshot_config`).
    """
    if mode == "none":
        return None, None, {}, {}, {}
    try:
        info = runtime.install_runtime(out_dir, mode)
    except Exception as err:
        raise BuildError(f"runtime ({mode}) could not be installed: {err} "
                         "(run scripts/fetch_runtime.py, or build with --runtime cdn|none)") from err
    wheel_url = wheel.build_wheel(out_dir, i18n_dir)
    wheel_bytes = (out_dir / wheel_url).stat().st_size     # a zip: about as large compressed
    sizes = {"fetched": info["fetched_bytes"] + wheel_bytes, "download": info["download_bytes"] + wheel_bytes}
    return info["pyodide_base"], wheel_url, info["csp_extra"], sizes, info["snapshot"]


def template_error(err: jinja2.TemplateError, templates: Path) -> BuildError:
    """A Jinja error as a BuildError naming the template file and line."""
    if isinstance(err, jinja2.TemplateSyntaxError):
        path = err.filename or (templates / err.name if err.name else templates)
        return BuildError(f"template error: {err.message}", display_path(Path(path)), err.lineno)
    # Errors while rendering (an undefined name, a bad filter argument): the innermost template
    # frame names the file; its line is the template's once Template.render has rewritten the
    # traceback, else (a macro called from Python) the compiled code's, mapped back here.
    root = templates.resolve()
    for frame, line in reversed(list(traceback.walk_tb(err.__traceback__))):
        path = Path(frame.f_code.co_filename)
        if path.is_absolute() and root in path.resolve().parents:
            compiled = frame.f_globals.get("__jinja_template__")
            if compiled is not None:
                line = compiled.get_corresponding_lineno(line)
            return BuildError(f"template error: {err}", display_path(path), line)
    return BuildError(f"template error: {err}", display_path(templates))


def page_url(url: str | None, root: str) -> str:
    """A site-root-relative URL as seen from a page ``root`` levels down; absolute kept."""
    if not url:
        return ""
    if urlparse(url).scheme or url.startswith("/"):
        return url
    return root + url


def csp_header(extra: dict) -> str:
    """The Content-Security-Policy of every page: only 'self' plus what the runtime needs."""
    policy = {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
    }
    for directive in sorted(extra):
        for source in extra[directive]:
            if source not in policy.setdefault(directive, ["'self'"]):
                policy[directive].append(source)
    # Only fixed keywords and URL origins: safe to put in the attribute unescaped.
    return render.Markup("; ".join(f"{k} {' '.join(v)}" for k, v in policy.items()))


CONTENTS = "contents.html"     # each language's contents page: the site as a path (issue 27 item 7)


def main_figure(prep: Prepared):
    """A page's opening figure: the one named after the first of its demo sections that draws one
    (at the values the page opens with), else None."""
    return next((prep.figures[sc.name] for sc in prep.shortcodes
                 if sc.kind == "demo" and sc.name in prep.figures), None)


def _nav(content: Content, lang: str, current: str) -> list[dict]:
    """The header's links: the contents page, then every page in reading order."""
    nav = [{"href": CONTENTS, "label": content.strings[lang].get("site.contents", CONTENTS),
            "current": current == CONTENTS}]
    for s in content.slugs():
        p = content.page(lang, s)
        nav.append({"href": p.output_name, "label": p.meta.get("nav", p.title), "current": p.output_name == current})
    return nav


def _chrome(content: Content, site: publish.Urls, urls: dict, csp: str, lang: str, name: str) -> dict:
    """What every page of a language shares around its article (``name``: its file in ``<lang>/``)."""
    strings = content.strings[lang]
    alternates = [{"hreflang": content.tag(l), "href": site.link(f"{l}/{name}", "../"),
                   "name": content.strings[l].get("site.lang_name", l), "code": l} for l in content.langs]
    alternates.append({"hreflang": "x-default", "href": site.link("index.html", "../"), "name": "", "code": ""})
    first = content.page(lang, content.slugs()[0])
    return {"html_lang": content.tag(lang), "lang": lang, "strings": inline_strings(strings),
            "strings_url": page_url(urls["strings"][lang], "../"), "csp": csp, "root": "../",
            "home_href": "index.html", "alternates": alternates,
            "switches": [a for a in alternates[:-1] if a["hreflang"] != content.tag(lang)],
            "nav": _nav(content, lang, name),
            "glossary_tags": {l: content.tag(l) if l in content.langs else l for l in ("en", "zh")},
            "glossary_href": f"{first.output_name}#{glossary.ANCHOR}" if content.glossary else None}


def render_contents(content: Content, prepared: dict, env, out: Path, chrome: dict, social) -> None:
    """``<lang>/contents.html``: every page in reading order, numbered, with its one sentence
    (front matter ``summary``, else its description) and its opening figure as the thumbnail."""
    lang = chrome["lang"]
    t = render.Translator(content.strings[lang], lang, f"{lang}/{CONTENTS}")
    entries = []
    for n, slug in enumerate(content.slugs(), 1):
        prep = prepared[(lang, slug)]
        figure = main_figure(prep)
        entries.append({"number": t("site.contents_number", n=n), "href": prep.page.output_name,
                        "title": prep.page.title,
                        "summary": prep.page.meta.get("summary", prep.page.meta.get("description", "")),
                        "figure": render.tree_html(figure, t) if figure else None})
    title, lead = t("site.contents_title"), t("site.contents_lead")
    html = env.get_template("contents.html").render(
        **chrome, t=t, page={"title": title, "description": lead, "heading": title}, entries=entries,
        toc=[], body="", social=social(f"{lang}/{CONTENTS}", title, lead))
    (out / lang / CONTENTS).write_text(html, encoding="utf-8")


def render_site(content: Content, prepared: dict, env, out: Path, urls: dict, csp: str,
                site: publish.Urls = publish.Urls(None), previews: dict | None = None) -> int:
    """Write every page, each language's contents page and the language choice; return the number
    of HTML files."""
    count = 0
    slugs = content.slugs()
    for lang in content.langs:
        strings = content.strings[lang]
        (out / lang).mkdir(parents=True, exist_ok=True)
        for slug in slugs:
            prep = prepared[(lang, slug)]
            page = prep.page
            t = render.Translator(strings, lang, page.path)
            html = env.get_template("page.html").render(
                **_chrome(content, site, urls, csp, lang, page.output_name),
                page={"title": page.title, "description": page.meta.get("description", ""),
                      "heading": header_breaks(page.title, t("site.break_after"))},     # the h1: breaks between words
                t=t, toc=prep.toc, body=render.Markup(prep.html),
                has_demos="<form class=\"controls\"" in prep.html or "class=\"pydemo\"" in prep.html,
                glossary=glossary.rows(content.glossary) if slug == slugs[0] else None,
                pyodide_url=page_url(urls["pyodide"], "../"), wheel_url=page_url(urls["wheel"], "../"),
                runtime_sizes=urls.get("sizes") or {}, snapshot=urls.get("snapshot") or {},
                social=_social(content, site, previews, lang, slug, f"{lang}/{page.output_name}", page.title,
                               page.meta.get("description", "")))
            (out / lang / page.output_name).write_text(html, encoding="utf-8")
            count += 1
        # The contents page's link preview is the first page's image (it has no figure of its own).
        # it runs no Python: no runtime sources in its policy
        render_contents(content, prepared, env, out, _chrome(content, site, urls, csp_header({}), lang, CONTENTS),
                        lambda rel, title, text, lang=lang: _social(content, site, previews, lang, slugs[0],
                                                                     rel, title, text))
        count += 1
    langs = []
    for lang in content.langs:
        s = content.strings[lang]
        home = content.page(lang, slugs[0])
        langs.append({"code": lang, "hreflang": content.tag(lang), "href": f"{lang}/{home.output_name}",
                      "title": s.get("site.title", home.title), "description": home.meta.get("description", ""),
                      "choose": s.get("site.choose", s.get("site.lang_name", lang)),
                      "contents_href": f"{lang}/{CONTENTS}", "contents": s.get("site.contents_title", CONTENTS)})
    alternates = [{"hreflang": l["hreflang"], "href": site.link(l["href"], "")} for l in langs]
    alternates.append({"hreflang": "x-default", "href": site.link("index.html", "")})
    first = content.langs[0]
    html = env.get_template("index.html").render(
        html_lang=content.tag(first), langs=langs, alternates=alternates,
        csp=csp_header({}), root="",   # the language choice runs no Python: no runtime sources
        social=_social(content, site, previews, first, slugs[0], "index.html", langs[0]["title"],
                       langs[0]["description"]))
    (out / "index.html").write_text(html, encoding="utf-8")
    render_not_found(content, env, out, site)
    return count + 2


def _social(content: Content, site: publish.Urls, previews: dict | None, lang: str, slug: str, rel: str,
            title: str, description: str) -> dict | None:
    """Canonical link and link-preview meta of one page (None when no preview images were made)."""
    if previews is None:
        return None
    return publish.page_meta(content, site, lang, rel, title, description,
                             publish.preview_path(lang, slug), previews[(lang, slug)])


def render_not_found(content: Content, env, out: Path, site: publish.Urls) -> None:
    """404.html in every language; a static host serves it at any depth, so its links are absolute
    (the base URL, else the site root)."""
    root = site.base or "/"
    langs = []
    for lang in content.langs:
        t = render.Translator(content.strings[lang], lang, publish.NOT_FOUND)
        home = content.page(lang, content.slugs()[0])
        langs.append({"hreflang": content.tag(lang), "href": f"{root}{lang}/{home.output_name}",
                      "title": t("notfound.title"), "text": t("notfound.text"), "home": t("notfound.home")})
    html = env.get_template(publish.NOT_FOUND).render(
        html_lang=content.tag(content.langs[0]), langs=langs, alternates=[],
        csp=csp_header({}), root=root, social=None)
    (out / publish.NOT_FOUND).write_text(html, encoding="utf-8")


def copy_static(static_dir: Path, out: Path) -> int:
    """Copy templates/static/ to site/static/ (sorted; caches and dotfiles skipped)."""
    n = 0
    if not static_dir.is_dir():
        return 0
    for src in sorted(static_dir.rglob("*")):
        rel = src.relative_to(static_dir)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts) or not src.is_file():
            continue
        dest = out / "static" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        n += 1
    return n


def publish_assets(content: Content, prepared: dict, out: Path, templates: Path) -> dict:
    """Link-preview PNGs and the touch icon (before the pages: they name the images)."""
    figures = {key: main_figure(prep) for key, prep in prepared.items()}
    translators = {lang: render.Translator(content.strings[lang], lang, lang) for lang in content.langs}
    css = (templates / "static" / "style.css").read_text(encoding="utf-8")
    font_files = publish.preview.font_files()
    if font_files is None:
        print("note: fonts-dejavu-core / fonts-noto-cjk not found: link-preview images use the system's "
              "fonts and may differ from the published ones", file=sys.stderr)
    previews = publish.write_previews(out, content, figures, translators, css, font_files)
    publish.write_icons(out, templates / "static", font_files)
    return previews


# ---------------------------------------------------------------- the swap

def swap_into(tmp: Path, out: Path) -> None:
    """Replace ``out`` by the finished ``tmp`` directory (same file system): two renames, so
    ``out`` is missing for ~10 µs (benchmarks/RESULTS.md; a request then gets a 404), which the
    dev server can afford: ``--watch`` reloads a page only after the swap, and the published
    site is uploaded, never swapped."""
    if out.is_symlink() or out.is_file():
        raise BuildError("output path exists and is not a directory", out)
    if not out.exists():
        os.rename(tmp, out)
        return
    old = out.with_name(out.name + ".old-" + tmp.name.rsplit("-", 1)[-1])
    os.rename(out, old)
    os.rename(tmp, out)
    shutil.rmtree(old)


# ---------------------------------------------------------------- entry point

@dataclass
class Built:
    """What :func:`rebuild_pages` (``--watch``) reuses of the last full build."""

    content: Content
    prepared: dict
    env: object
    results: dict
    out: Path
    page_args: tuple       # render_site's arguments after ``out``


def build(out_dir: str | Path = "site", *, content_dir: str | Path | None = None,
          templates_dir: str | Path | None = None, runtime: str = "local",
          quiet: bool = True, base_url: str | None = None, keep: bool = False) -> dict:
    """Build the whole site into ``out_dir``; return per-phase timings (seconds) and counts
    (``keep``: and ``"built"``, a :class:`Built` for :func:`rebuild_pages`).

    Everything is written into a temporary sibling directory first; only a complete
    build replaces ``out_dir`` (a failed build leaves the previous site untouched).
    """
    if runtime not in RUNTIME_MODES:
        raise BuildError(f"unknown runtime mode {runtime!r}; use {', '.join(RUNTIME_MODES)}")
    site = publish.Urls(publish.normalize_base_url(base_url))
    timer = _Timer()
    content_root = Path(content_dir) if content_dir else ROOT / "content"
    templates = Path(templates_dir) if templates_dir else ROOT / "templates"
    out = Path(out_dir).resolve()
    with timer.phase("content"):
        content = content_mod.load_content(content_root)
    with timer.phase("math"):
        prepared = prepare_pages(content)
    env = render.make_env(templates)
    results = {}
    if runtime != "none":   # without a runtime nothing answers a change: no results to ship
        with timer.phase("precompute"):
            results = precompute_results(content, prepared)
    with timer.phase("views"):
        try:
            compute_blocks(content, prepared, env, ROOT / "src", results)
        except jinja2.TemplateError as err:
            raise template_error(err, templates) from err
    with timer.phase("markdown"):
        convert_markdown(content, prepared)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        with timer.phase("runtime"):
            base, wheel_url, csp_extra, runtime_sizes, snapshot = install_runtime(tmp, runtime, content.root / "i18n")
        with timer.phase("render"):
            n_static = copy_static(templates / "static", tmp)
            results_report = write_results(tmp, results)
            strings_paths = write_strings(tmp, content)
            # The readers' download for "run it on real ranks" (pure Python, any runtime mode).
            wheel.build_wheel(tmp, content.root / "i18n", full=True)
        with timer.phase("publish"):
            previews = publish_assets(content, prepared, tmp, templates)
        with timer.phase("render"):
            page_args = ({"pyodide": base, "wheel": wheel_url, "sizes": runtime_sizes, "snapshot": snapshot,
                          "strings": strings_paths}, csp_header(csp_extra), site, previews)
            try:
                n_html = render_site(content, prepared, env, tmp, *page_args)
            except jinja2.TemplateError as err:
                raise template_error(err, templates) from err
        with timer.phase("publish"):
            math_font = fonts.install_math_font(tmp)
            publish.write_crawler_files(tmp, content, site)
        with timer.phase("render"):
            os.chmod(tmp, 0o755)
            swap_into(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    stats = {"pages": n_html, "static_files": n_static,
             "formulas": sum(len(p.formulas) for p in prepared.values()),
             "demos": sum(len(p.shortcodes) for p in prepared.values()),
             "runtime": runtime if base else "none", "math_font": math_font, "base_url": site.base,
             "results": results_report}
    result = {"timings": {k: round(v, 4) for k, v in timer.times.items()}, **stats,
              "out": str(out)}
    if keep:
        result["built"] = Built(content, prepared, env, results, out, page_args)
    if not quiet:
        if site.base is None:
            print(publish.NO_BASE_NOTE)
        total = sum(timer.times.values())
        print(f"built {n_html} pages, {stats['formulas']} formulas, {stats['demos']} demos into "
              f"{display_path(out)} in {total:.2f} s (" +
              ", ".join(f"{k} {v:.2f}" for k, v in timer.times.items()) + ")")
    return result


def _demos(prep: Prepared) -> list:
    """What a page's blocks are computed from (its shortcodes, without their line numbers)."""
    return [(sc.kind, sc.name, sc.controls, sc.fold) for sc in prep.shortcodes]


def rebuild_pages(built: Built) -> list[tuple[str, str]] | None:
    """After an edit to pages' Markdown: those pages again (every page's HTML rewritten in
    place: a title is in every page's navigation); returns the (lang, slug) of the pages that
    changed.  None: the edit changed more than text and formulas (a page added or removed, a
    demo's shortcode: results files and preview images depend on them): build everything.
    A BuildError leaves ``built`` and the served site as they were."""
    content = content_mod.load_content(built.content.root)
    if (set(content.pages) != set(built.content.pages) or content.slugs() != built.content.slugs()
            or content.strings != built.content.strings):    # the sitemap, the shared preview images
        return None
    keys = [k for k, page in content.pages.items()
            if (page.meta, page.body) != (built.content.pages[k].meta, built.content.pages[k].body)]
    fresh = {}
    for k in keys:
        old = built.prepared[k]
        fresh[k] = prepare_page(content.pages[k], {(f.latex, f.display): m for f, m in zip(old.formulas, old.mathml)})
        if _demos(fresh[k]) != _demos(old):
            return None
        # The same shortcodes, strings, templates and views: the same demo blocks and figures.
        fresh[k].blocks, fresh[k].figures = old.blocks, old.figures
    prepared = {**built.prepared, **fresh}
    convert_markdown(content, prepared, keys)
    render_site(content, prepared, built.env, built.out, *built.page_args)
    fonts.install_math_font(built.out)      # a formula may use a character the subset lacks
    built.content, built.prepared = content, prepared
    return keys
