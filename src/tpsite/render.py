"""Jinja rendering: pages, demo blocks ({{demo NAME}}) and Python demos ({{pydemo NAME}}).

The Jinja environment uses ``StrictUndefined`` (a typo in a template is a build error)
and autoescaping.  Interface strings come through :class:`Translator` (``t(key)``); a
key missing from the string tables is a build error naming the page being rendered.

A demo block is rendered from ``tpmath.views.render(NAME, None, lang)`` (the default
control values) and ``tpmath.views.sections()[NAME].controls``, with exactly the DOM of
ARCHITECTURE.md so that ``templates/static/app.js`` can later replace the same tables
and values with live results.  Cells that are ``{"key", "args"}`` dicts are translated; tables
and figures are element trees (``tpmath.views.table``, ``tpmath.views.tree``) serialised by
:func:`tree_html`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from .errors import BuildError
from .wheel import download_path

VOID_SVG = frozenset({"rect", "line", "path", "polygon", "circle"})   # written self-closed

PYDEMO_TIMEOUT = 60  # seconds


class Translator:
    """``t(key, **args)``: the string of ``key`` in one language, placeholders filled."""

    def __init__(self, strings: dict[str, str], lang: str, where):
        self.strings = strings
        self.lang = lang
        self.where = where      # file named in errors (the page being rendered)

    def __call__(self, key: str, **args: Any) -> str:
        if key not in self.strings:
            raise BuildError(f"missing string key {key!r} (add it to content/i18n/{self.lang}.toml "
                             "and the other languages)", self.where)
        text = self.strings[key]
        if not args:
            return text
        try:
            return text.format_map(args)
        except (KeyError, IndexError, ValueError) as err:
            raise BuildError(f"string {key!r} = {text!r} cannot take arguments {sorted(args)}: "
                             f"{err!r}", self.where) from None

    def has(self, key: str) -> bool:
        return key in self.strings

    def cell(self, cell: Any) -> str:
        """A table cell / value / note: verbatim string, or ``{"key", "args"}`` translated."""
        if isinstance(cell, dict) and "el" in cell:
            return tree_html(cell["el"], self)
        if isinstance(cell, dict):
            if "key" not in cell:
                raise BuildError(f"view cell {cell!r} has no 'key'", self.where)
            args = {k: self.cell(v) for k, v in (cell.get("args") or {}).items()}
            if cell["key"] not in self.strings and "as_typed" in args:   # a choice without a label
                return args["as_typed"]
            return self(cell["key"], **args)
        if cell is None:
            return ""
        if isinstance(cell, float):
            raise BuildError(f"view returned an unformatted number {cell!r} (use tpmath.fmt)",
                             self.where)
        return str(cell)


def make_env(templates_dir: Path) -> jinja2.Environment:
    """The Jinja environment of the site."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["json_script"] = json_script
    # The page's ES modules (templates/static/js/), preloaded by page.html so the browser fetches
    # them all at once instead of discovering app.js's imports level by level.
    env.globals["js_modules"] = sorted(p.name for p in (templates_dir / "static" / "js").glob("*.js"))
    return env


def json_script(data: Any) -> Markup:
    """JSON for a ``<script type="application/json">``: sorted, and ``<`` escaped so the
    data can never close the script element."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


# ---------------------------------------------------------------- demo blocks

def tree_html(node: dict, t: Translator) -> Markup:
    """An element tree (ARCHITECTURE.md, "Element trees") as markup: the same elements, in the
    same order, with the same attributes as the page's JavaScript builds from the same tree."""
    from tpmath.views import tree   # the whitelist lives with the views that build the trees
    try:
        tree.check(node)
    except tree.TreeError as err:
        raise BuildError(f"figure, table or grid tree: {err}", t.where) from None
    return Markup(_node_html(node, t))


def _node_html(node: dict, t: Translator) -> str:
    tag = node["t"]
    attrs = "".join(f' {k}="{escape(v)}"' for k, v in node.get("a", {}).items())
    if "x" in node:
        return f"<{tag}{attrs}>{escape(t.cell(node['x']))}</{tag}>"
    kids = node.get("c", [])
    if not kids and tag in VOID_SVG:
        return f"<{tag}{attrs}/>"
    return f"<{tag}{attrs}>" + "".join(_node_html(c, t) for c in kids) + f"</{tag}>"


def _attr_value(value: Any) -> str:
    """A control value as the page shows it (``2``, ``0.5``, ``forward``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _key_part(name: str) -> str:
    return str(name).replace("-", "_")


def _slider(c, value: str, options: list[dict], where) -> dict | None:
    """Attributes of the range slider beside control ``c`` (None: it has none).  The page's
    templates/static/js/sliders.js maps positions to values with the same scales."""
    if not c.slider:
        return None
    if c.kind == "select":
        index = next(i for i, o in enumerate(options) if o["selected"])
        return {"scale": "index", "min": "0", "max": str(len(options) - 1), "step": "1", "value": str(index)}
    if c.min is None or c.max is None:
        raise BuildError(f"control {c.name!r}: a slider needs min and max", where)
    v = float(value)
    if c.slider == "log":
        if c.min <= 0:
            raise BuildError(f"control {c.name!r}: a log slider needs min > 0", where)
        lo, hi = math.ceil(math.log2(c.min)), math.floor(math.log2(c.max))
        pos = min(max(round(math.log2(v)), lo), hi) if v > 0 else lo
        return {"scale": "log2", "min": str(lo), "max": str(hi), "step": "1", "value": str(pos)}
    if c.slider == "symlog":
        top = float(c.max)
        pos = round(math.copysign(math.log10(1 + min(abs(v), top)) / math.log10(1 + top) * SYMLOG_STEPS, v))
        return {"scale": "symlog", "min": str(-SYMLOG_STEPS), "max": str(SYMLOG_STEPS), "step": "1",
                "value": str(pos), "top": _attr_value(c.max)}
    if c.slider is not True:
        raise BuildError(f"control {c.name!r}: slider={c.slider!r} is not True, 'log' or 'symlog'", where)
    step = "any" if c.step is None else _attr_value(c.step)
    return {"scale": "lin", "min": _attr_value(c.min), "max": _attr_value(c.max), "step": step, "value": value}


SYMLOG_STEPS = 100      # positions either side of 0 on a symlog slider (keyboard: one per key)


def tables_summary(t: Translator, n: int) -> str:
    """The summary line of a demo's folded tables, with their count (js/apply.js words it alike)."""
    return t("site.tables_fold_one") if n == 1 else t("site.tables_fold", n=n)


def demo_model(section, result: dict, t: Translator, results_url: str | None = None,
               fold: bool = False) -> dict:
    """Plain data for the ``demo_block`` macro (everything already translated); ``fold``: its
    tables go in a closed <details> under its figure (``{{demo NAME tables=folded}}``)."""
    from tpmath.i18n import option      # importable once build.py put src/ on the path
    from tpmath.views import table      # a table record -> its element tree, as the worker sends it
    name = result["section"]
    current = result.get("controls", {})
    states = result.get("control_state", {})
    controls = []
    for c in section.controls:
        state = states.get(c.name, {})
        value = state["value"] if "value" in state else _attr_value(current.get(c.name, c.default))
        off = state.get("options") or {}          # single choices that do nothing here: {value: why}
        options = []
        for opt in c.options:
            opt_value = _attr_value(opt)
            # its label, built here once: shipped as data-label, which js/demo.js shows too
            label = t.cell(option(c.name, opt_value))
            text = t("site.option_off", label=label, why=t.cell(off[opt_value])) if opt_value in off else label
            options.append({"value": opt_value, "name": label, "label": text, "selected": opt_value == value,
                            "disabled": opt_value in off})
        if c.kind == "select" and not any(o["selected"] for o in options):
            raise BuildError(f"section {name!r}: default {value!r} of control {c.name!r} is not "
                             f"one of its options", t.where)
        disabled = bool(state.get("disabled"))
        controls.append({"name": c.name, "kind": c.kind, "label": t(c.label_key), "value": value,
                         "options": options,
                         "min": None if c.min is None else _attr_value(c.min),
                         "max": None if c.max is None else _attr_value(c.max),
                         "step": None if c.step is None else _attr_value(c.step),
                         "slider": _slider(c, value, options, t.where), "disabled": disabled,
                         # set by the view (a preset's field): js/demo.js release()
                         "set": disabled and isinstance(state.get("value"), str),
                         "why": t.cell(state["why"]) if disabled and state.get("why") is not None else ""})
    values = [{"name": k, "label": t(f"value.{_key_part(k)}"), "text": t.cell(v)}
              for k, v in result.get("values", {}).items()]
    tables = [tree_html(node, t) for node in table.trees(section, result).values()]
    notes = [{"name": k, "text": t.cell(v)} for k, v in result.get("notes", {}).items()]
    figures = [tree_html(node, t) for _, node in sorted(result.get("figures", {}).items())]
    return {"name": name, "controls": controls, "values": values, "tables": tables, "notes": notes,
            "figures": figures, "fold": tables_summary(t, len(tables)) if fold and tables else "",
            "status": t("runtime.loading") if t.has("runtime.loading") else "",
            "real": result.get("real", []), "download": "../" + download_path(), "results": results_url,
            "download_name": download_path().rsplit("/", 1)[1]}


def render_demo(env: jinja2.Environment, section, result: dict, t: Translator,
                results_url: str | None = None, fold: bool = False) -> str:
    """The HTML of one ``{{demo NAME}}`` block (``results_url``: its precomputed results file;
    ``fold``: its tables folded)."""
    macro = env.get_template("demo.html").module.demo_block
    return str(macro(demo_model(section, result, t, results_url, fold), t))


# ---------------------------------------------------------------- Python demos

def run_pydemo(path: Path, src_dir: Path, shown_path) -> str:
    """Run a demo program at build time; its stdout is shown on the page."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src_dir) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        proc = subprocess.run([sys.executable, str(path)], cwd=str(path.parent), env=env,
                              capture_output=True, timeout=PYDEMO_TIMEOUT, text=True,
                              encoding="utf-8", errors="replace")
    except subprocess.TimeoutExpired:
        raise BuildError(f"demo did not finish within {PYDEMO_TIMEOUT} s", shown_path) from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise BuildError(f"demo exited with status {proc.returncode}:\n{tail}", shown_path)
    return proc.stdout


def highlight_python(code: str) -> str:
    """Pygments HTML with CSS classes (the stylesheet colours them; no inline styles)."""
    return highlight(code, PythonLexer(), HtmlFormatter(cssclass="highlight", nowrap=False))


def render_pydemo(env: jinja2.Environment, name: str, code: str, output: str, t: Translator) -> str:
    """The HTML of one ``{{pydemo NAME}}`` block."""
    macro = env.get_template("demo.html").module.pydemo_block
    return str(macro({"name": name, "code_html": Markup(highlight_python(code)), "source": code,
                      "rows": min(max(code.count("\n") + 1, 4), 40), "output": output}, t))
