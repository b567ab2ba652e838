"""Tables as element trees (tpmath/views/table.py): one conversion, used by the builder and sent by
the worker, and the option labels built once.

The static page's tables are the trees the worker sends, serialised by the figures' serialiser
(so the live morph starts from exactly what the tree describes); each tree reads like its record
(caption, header cells, row headers, prose cells, foot, grid cells); neither the template nor the
page's script has a table renderer of its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import pytest

from tpmath import views
from tpmath.views import table, tree
from tpsite.content import load_strings
from tpsite.render import Translator, make_env, render_demo, tree_html

from html_tree import parse

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
SECTIONS = sorted(views.sections())


def _t(lang: str) -> Translator:
    return Translator(load_strings(ROOT / "content" / "i18n", lang)[0], lang, "test_table")


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return make_env(TEMPLATES)


def _text(cell, t: Translator) -> str:
    """What a record's cell reads as on the page (an element tree: its texts in order)."""
    if isinstance(cell, dict) and "el" in cell:
        return "".join(t.cell(n["x"]) for n in tree.walk(cell["el"]) if "x" in n)
    return t.cell(cell)


@pytest.mark.parametrize("section", SECTIONS)
def test_worker_sends_the_trees_the_builder_writes(section, env):
    """render_json (the worker's answer) carries each table as the tree whose markup the static
    demo block holds, byte for byte: the page morphs one into the other."""
    t = _t("zh")
    sec = views.sections()[section]
    payload = json.loads(views.render_json(section, "{}", "zh"))
    assert payload["ok"], payload
    sent = payload["result"]["tables"]
    html = render_demo(env, sec, views.render(section, None, "zh"), t)
    assert list(sent) == [n for n in sec.tables if n in sent] + [n for n in sent if n not in sec.tables]
    for name, node in sent.items():
        tree.check(node)
        markup = str(tree_html(node, t))
        assert markup.startswith('<div class="table-wrap"') and f'data-table="{name}"' in markup
        assert markup in html, f"{section}/{name}: the static table is not the tree the worker sends"
    assert html.count('<div class="table-wrap"') == len(sent)


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_table_reads_like_its_record(section, lang):
    """Caption, column headers, row headers (th scope=row), prose cells and the foot of the
    markup, checked against the record (not against another renderer)."""
    t = _t(lang)
    result = views.render(section, None, lang)
    for name, spec in result["tables"].items():
        page = parse(str(tree_html(table.table_tree(section, name, spec), t)))
        wrap = page.find("div", class_="table-wrap")
        assert wrap.attrs["role"] == "region" and wrap.attrs["tabindex"] == "0"
        tab = wrap.find("table", data_table=name)
        cap = tab.find("caption")
        if spec.get("caption") is None:
            assert cap is None and "aria-labelledby" not in wrap.attrs
        else:
            want = t(spec["caption"]) if isinstance(spec["caption"], str) else t.cell(spec["caption"])
            assert cap.text() == want and cap.attrs["id"] == wrap.attrs["aria-labelledby"] == f"cap-{section}-{name}"
        head = tab.find("thead").find_all("th")
        assert [h.text() for h in head] == [t(c) if isinstance(c, str) else t.cell(c) for c in spec["columns"]]
        assert all(h.attrs == {"scope": "col"} for h in head)
        for part, rows in (("tbody", spec["rows"]), ("tfoot", spec.get("foot") or [])):
            el = tab.find(part)
            if part == "tfoot" and not rows:
                assert el is None
                continue
            trs = [c for c in el.element_children() if c.tag == "tr"]
            assert len(trs) == len(rows)
            for tr_, row in zip(trs, rows):
                cells = tr_.element_children()
                assert [c.tag for c in cells] == ["th"] + ["td"] * (len(row) - 1)
                assert cells[0].attrs == {"scope": "row"}
                for c, value in zip(cells, row):
                    assert c.text() == _text(value, t), (name, value)
                    prose = c.tag == "td" and isinstance(value, dict) and "key" in value
                    assert c.classes() == (["prose"] if prose else []), (name, value)


def test_a_grid_cell_keeps_its_rank_tint():
    """A grid cell's tree is the cell's content: its rank class and data-rank survive (the
    stylesheet tints by them)."""
    spec = views.render("mlp", None, "en")["tables"]["mlp-ranks"]
    node = table.table_tree("mlp", "mlp-ranks", spec)
    first = node["c"][0]["c"][2]["c"][0]     # wrap > table > (caption, thead, tbody) > first row
    assert first["c"][0] == {"t": "th", "a": {"scope": "row"}, "c": [tree.rank_tag(0)["el"]]}
    grid = first["c"][1]["c"][0]
    assert grid["t"] == "table" and grid["a"]["data-rank"] == "0" and "rk" in grid["a"]["class"].split()


def test_no_table_renderer_outside_the_tree():
    """Neither the template nor the page's script builds a table of its own: the table is a tree
    (templates/demo.html wrote one with Jinja, js/apply.js another with createElement)."""
    demo = (TEMPLATES / "demo.html").read_text(encoding="utf-8")
    assert not re.search(r"<(table|thead|tbody|tfoot|tr|th|td|caption)\b", demo)
    for js in (TEMPLATES / "static" / "js").glob("*.js"):
        src = js.read_text(encoding="utf-8")
        assert not re.search(r"""createElement\(\s*["'](table|thead|tbody|tfoot|tr|th|td|caption)["']""", src), js.name
        assert not re.search(r"\.(insertRow|insertCell|createCaption|createTHead|createTFoot)\(", src), js.name
        assert "opt.${" not in src, f"{js.name} builds option-label keys (the builder ships them: data-label)"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_option_labels_are_built_once_and_shipped(lang, env):
    """Every choice carries its label (data-label, what js/demo.js shows when the view changes
    which choices are off): the label of tpmath.i18n.option (the cell messages name it by), and
    the option's text is that label, or "label (why)" when the choice is off on the static page."""
    from tpmath.i18n import option
    t = _t(lang)
    for section in SECTIONS:
        sec = views.sections()[section]
        result = views.render(section, None, lang)
        page = parse(render_demo(env, sec, result, t))
        for c in sec.controls:
            if c.kind != "select":
                continue
            opts = page.find("select", name=c.name).find_all("option")
            off = result.get("control_state", {}).get(c.name, {}).get("options") or {}
            assert [o.attrs["value"] for o in opts] == [str(v) for v in c.options]
            for o in opts:
                label = t.cell(option(c.name, o.attrs["value"]))
                assert o.attrs["data-label"] == label
                why = off.get(o.attrs["value"])
                assert o.text() == (label if why is None else t("site.option_off", label=label, why=t.cell(why)))
                assert ("disabled" in o.attrs) == (why is not None)
