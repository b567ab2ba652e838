"""A control's bounds are stated once, in its ``Control`` record (issue 13 item 6).

For every section and every control: the bounds the page shows (the ``<select>``'s options,
the ``<input>``'s min/max, read from the demo's HTML) are the ones the view enforces: a value on
them is accepted, a value outside them is refused by the view with that control's name as the
field and the same message :meth:`Control.parse` gives.  Nothing here restates a bound.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from tpmath import TPMathError, views
from tpmath.views import Control
from tpsite.content import load_content
from tpsite.render import Translator, make_env, render_demo

ROOT = Path(__file__).resolve().parents[1]
CONTENT = load_content(ROOT / "content")
ENV = make_env(ROOT / "templates")
SECTIONS = views.sections()
CASES = [(s, c.name) for s in sorted(SECTIONS) for c in SECTIONS[s].controls]


class _Form(HTMLParser):
    """The named controls of a demo's HTML: {name: {"tag", attributes…, "options": [values]}}."""

    def __init__(self):
        super().__init__()
        self.controls: dict[str, dict] = {}
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("input", "select") and a.get("name") and not a["id"].startswith("fig-"):
            self.controls[a["name"]] = {"tag": tag, **a, "options": []}
            self._select = a["name"] if tag == "select" else None
        elif tag == "option" and self._select:
            self.controls[self._select]["options"].append(a["value"])

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None


def _page_controls(section: str) -> dict[str, dict]:
    """What the page shows for ``section``'s controls (its static demo block, English)."""
    t = Translator(CONTENT.strings["en"], "en", "test")
    form = _Form()
    form.feed(render_demo(ENV, SECTIONS[section], views.render(section), t))
    return form.controls


PAGE = {s: _page_controls(s) for s in SECTIONS}


def _control(section: str, name: str) -> Control:
    return next(c for c in SECTIONS[section].controls if c.name == name)


def _integral(c: Control) -> bool:
    return c.kind == "select" and c.int_options is not None or isinstance(c.step, int)


def _text(x: float, integral: bool) -> str:
    """A number as the page would send it."""
    return str(int(x)) if integral else repr(float(x))


def _inside(section: str, name: str) -> list[str]:
    """The page's own bounds: every option of a select, min and max of a number."""
    shown = PAGE[section][name]
    return shown["options"] if shown["tag"] == "select" else [shown["min"], shown["max"]]


def _outside(section: str, name: str) -> list[str]:
    """Values just outside what the page shows (derived from the page, not restated)."""
    c, shown = _control(section, name), PAGE[section][name]
    if shown["tag"] == "select":
        if c.int_options is None:
            return ["not-an-option", shown["options"][0].upper() + "!"]
        ints = sorted(int(o) for o in shown["options"])
        gaps = [i for i in range(ints[0], ints[-1]) if i not in ints][:3]
        return [str(i) for i in [ints[0] - 1, ints[-1] + 1, *gaps]]
    lo, hi, integral = float(shown["min"]), float(shown["max"]), _integral(c)
    pad = (lambda x: 1.0) if integral else (lambda x: max(abs(x), 1.0) / 2)
    return [_text(lo - pad(lo), integral), _text(hi + pad(hi), integral)]


def _others(section: str) -> dict:
    """Other controls so that every field is the reader's: a preset sets some fields, `custom` none."""
    preset = next((c for c in SECTIONS[section].controls if c.name == "preset"), None)
    return {"preset": "custom"} if preset is not None and "custom" in preset.options else {}


def test_every_control_is_on_the_page_with_bounds():
    for section, name in CASES:
        c, shown = _control(section, name), PAGE[section].get(name)
        assert shown is not None, (section, name)
        if c.kind == "select":
            assert shown["tag"] == "select" and shown["options"], (section, name)
        else:      # a number without both bounds would be checked nowhere (e.g. 0/0 in a time model)
            assert c.kind == "number" and shown.get("min") and shown.get("max"), (section, name, shown)


BOUND_CODES = {"range", "too_small", "too_large", "not_choice", "not_integer", "empty_integer", "not_number",
               "empty_number", "not_finite"}


@pytest.mark.parametrize("section, name", CASES)
def test_the_page_bounds_are_accepted(section, name):
    """By the record and by the view: a view may still refuse a value by a rule between controls
    (tp must divide d_in, the root must be a rank), never by a bound of its own."""
    c = _control(section, name)
    for value in _inside(section, name):
        parsed = c.parse(value)
        assert str(parsed) == value or float(parsed) == float(value), (section, name, value, parsed)
        try:
            views.render(section, {**_others(section), name: value})
        except TPMathError as err:
            assert not (err.field == name and err.code in BOUND_CODES), (section, name, value, str(err))


@pytest.mark.parametrize("section, name", CASES)
def test_outside_the_page_bounds_the_view_refuses_with_the_controls_message(section, name):
    c = _control(section, name)
    outside = _outside(section, name)
    assert outside
    for value in outside:
        with pytest.raises(TPMathError) as own:
            c.parse(value)
        with pytest.raises(TPMathError) as viewed:
            views.render(section, {**_others(section), name: value})
        assert viewed.value.field == name == own.value.field, (section, name, value)
        assert viewed.value.cell == own.value.cell, (section, name, value)


@pytest.mark.parametrize("section, name", CASES)
def test_a_refused_control_has_a_name_in_every_language(section, name):
    """Messages call the field ``name.<control>`` (nothing else lists the controls' names)."""
    for lang, strings in CONTENT.strings.items():
        assert f"name.{name}" in strings, (section, name, lang)


# ------------------------------------------------- messages name option labels, never keys (issue 25 item 7)

import itertools
import re

from tpmath import attention as att_core, sp_layer
from tpmath.collectives import REGISTRY

# Every choice of a select whose value is a key (a word with - or _, e.g. same-dropout-seed): the
# page shows its label, and no message may show the key.
KEYED = {(s, c.name): [o for o in c.options if re.search(r"[-_]", str(o))]
         for s in SECTIONS for c in SECTIONS[s].controls if c.kind == "select" and c.int_options is None}
# (collective keys are also the English words for them, "two all-reduces": prose may use those)
ALL_KEYS = sorted({o for opts in KEYED.values() for o in opts} - set(REGISTRY))


def _on_page(cell, lang: str) -> str:
    return Translator(CONTENT.strings[lang], lang, "test").cell(cell)


def _keys_in(text: str) -> list[str]:
    return [k for k in ALL_KEYS if re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", text)]


def _label(control: str, value: str, lang: str) -> str:
    """The option's label as the page shows it (its value where it has none: 0.25)."""
    return CONTENT.strings[lang].get(f"opt.{control.replace('-', '_')}.{value.replace('-', '_')}", value)


@pytest.mark.parametrize("lang", sorted(CONTENT.strings))
@pytest.mark.parametrize("section, name", sorted(KEYED))
def test_a_refused_choice_lists_the_choices_by_their_labels(section, name, lang):
    with pytest.raises(TPMathError) as exc:
        views.render(section, {**_others(section), name: "no such choice"})
    text = _on_page(exc.value.cell, lang)
    assert _keys_in(text) == [], text
    for o in _control(section, name).options:
        assert _label(name, str(o), lang) in text, (o, text)


@pytest.mark.parametrize("lang", sorted(CONTENT.strings))
def test_core_messages_name_a_mistake_by_its_label_on_the_page_and_as_typed_in_the_cli(lang):
    """«错误示例 same-dropout-seed 需要 dropout > 0»: the page's message shows the option's label."""
    with pytest.raises(TPMathError) as dropout:
        sp_layer.run_sp_layer(tp=2, seq=4, batch=1, hidden=4, ffn=8, seed=0, mistake="same-dropout-seed", dropout=0)
    with pytest.raises(TPMathError) as needs:
        att_core.validate_config(1, 2, 1, 4, 1, 8, True, "f-and-g-swapped")      # needs tp > 1
    for err, mistake in ((dropout.value, "same-dropout-seed"), (needs.value, "f-and-g-swapped")):
        page = _on_page(err.cell, lang)
        assert _keys_in(page) == [] and _label("mistake", mistake, lang) in page, page
        assert mistake in err.message(lang)          # the command line: the value its --mistake takes


def test_no_message_string_spells_an_option_key():
    """The messages never contain a key literally (only {placeholders} filled with labels)."""
    bad = []
    for lang, strings in CONTENT.strings.items():
        for key, s in strings.items():
            if key.split(".")[0] in ("error", "need") and _keys_in(s):
                bad.append((lang, key, _keys_in(s)))
    assert bad == []


def _cells(obj):
    """Every translation cell of a result's notes and control state (reasons, option reasons)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("key"), str):
            yield obj
            return
        for v in obj.values():
            yield from _cells(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _cells(v)


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_notes_and_reasons_name_options_by_their_labels(section):
    selects = [c for c in SECTIONS[section].controls if c.kind == "select"]
    states = [{}] + [{c.name: o} for c in selects for o in c.options]
    seen = 0
    for values in states:
        try:
            res = views.render(section, values)
        except TPMathError as err:
            cells = [err.cell]
        else:
            cells = list(_cells([res.get("notes", {}), res.get("control_state", {})]))
        for cell, lang in itertools.product(cells, CONTENT.strings):
            text = _on_page(cell, lang)
            assert _keys_in(text) == [], (section, values, text)
            seen += 1
    assert seen or not selects or section in ("backward", "vocab-head", "dropout")   # (results without notes)


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_roots_that_are_not_ranks_are_offered_disabled_with_the_reason(ranks):
    """Issue 25 item 26: root 2 or 3 with 2 ranks was accepted, then refused."""
    from tpmath.collectives import REGISTRY as COLL
    for name, rec in COLL.items():
        res = views.render("collectives", {"collective": name, "ranks": str(ranks)})
        st = res["control_state"]["root"]
        if rec.root is None:
            assert st["disabled"] and "options" not in st
            continue
        assert not st["disabled"] and sorted(st["options"]) == [str(r) for r in range(ranks, 4)]
        assert all(w["args"]["last"] == f"R{ranks - 1}" for w in st["options"].values())
        for r in range(4):       # what is offered renders; what is disabled would be refused
            if r < ranks:
                views.render("collectives", {"collective": name, "ranks": str(ranks), "root": str(r)})
            else:
                with pytest.raises(TPMathError):
                    views.render("collectives", {"collective": name, "ranks": str(ranks), "root": str(r)})
