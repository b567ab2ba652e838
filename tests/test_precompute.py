"""The precomputed results of the demos' discrete control states (tpsite/precompute.py, issue 15).

Checked against the view functions themselves, called afresh here: every stored answer decodes to
exactly what ``views.render_json`` returns for the controls its key names (all states of the small
sections, a sample of the larger ones), in both languages; the walk's rule (which states are
there) is checked against the sections' own controls; the pool encoding and the cache on their
own; and the build wires the files to the pages (``--runtime cdn``) or leaves them out (``none``).
"""

from __future__ import annotations

import itertools
import json
import random

import pytest

from tpmath import views
from tpsite import precompute as pc

SECTIONS = views.sections()


@pytest.fixture(scope="module")
def made():
    """{section: (file data, rule)} for every section opened on its defaults, English."""
    out = {}
    for name, sec in SECTIONS.items():
        data, states, unique, rule = pc.choose(sec, views.render_json, "en")
        parsed = json.loads(data)
        assert states == len(parsed["states"]) and unique == len(parsed["results"])
        out[name] = (parsed, rule)
    return out


def controls_of(section: str, key: str) -> dict:
    return dict(zip((c.name for c in SECTIONS[section].controls), json.loads(key)))


def test_discrete_values_follow_the_controls():
    by = {(s, c.name): c for s, sec in SECTIONS.items() for c in sec.controls}
    assert pc.discrete_values(by[("mlp", "stage")]) == tuple(by[("mlp", "stage")].options)
    assert pc.discrete_values(by[("row-linear", "tp")]) == ("1", "2", "4")          # ints as the form holds them
    assert pc.discrete_values(by[("row-linear", "d_in")]) == tuple(str(i) for i in range(1, 9))
    smoothing = pc.discrete_values(by[("vocab-extras", "smoothing")])                # 0 … 1 by 0.05
    assert len(smoothing) == 21 and smoothing[:4] == ("0", "0.05", "0.1", "0.15") and smoothing[-1] == "1"
    assert all(abs(float(v) - i * 0.05) < 1e-12 for i, v in enumerate(smoothing))
    for continuous in (("vocab-ce", "shift"), ("ring", "count"), ("row-linear", "seed"), ("comm-cost", "tflops")):
        assert pc.discrete_values(by[continuous]) is None, continuous


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_every_stored_answer_is_the_view_functions_answer(made, section):
    data, rule = made[section]
    assert data["section"] == section and data["controls"] == [c.name for c in SECTIONS[section].controls]
    order = sorted(data["states"])
    keys = order if len(order) <= 40 else random.Random(section).sample(order, 40)
    for key in keys:
        controls = controls_of(section, key)
        fresh = json.loads(views.render_json(section, json.dumps(controls), "en"))
        assert pc.decode(data, data["states"][key]) == fresh, (section, key)
        # one file serves both languages (the answers are translation keys, not text), except where
        # the real-ranks block prints in the page's language (issue 25 item 17): only that part
        # differs, and precompute then writes one file per language
        zh = json.loads(views.render_json(section, json.dumps(controls), "zh"))
        if zh != fresh:
            assert SECTIONS[section].real, (section, key)
            bare = lambda p: {k: v for k, v in p["result"].items() if k != "real"}     # noqa: E731
            assert bare(zh) == bare(fresh), (section, key)


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_the_states_are_the_rule(made, section):
    """Small sections: every combination of the discrete controls that the form can send (the
    controls the static page disables stay as they are until another change enables them);
    larger ones: every single and every pair of changes from the static page, or -- when that
    file would pass the budget -- every single change and nothing further."""
    sec = SECTIONS[section]
    data, rule = made[section]
    answers = data["states"]
    first = views.render(section, None, "en")
    form, off = pc.initial_form(sec, first)
    choices = {c.name: pc.discrete_values(c) for c in sec.controls}
    combos = pc.combinations(sec)
    assert (rule == "all") == (combos <= pc.FULL_STATES_MAX) and rule in ("all", "near-2", "near-1")
    assert pc.state_key(sec, form) in answers                     # the static page itself
    free = [c.name for c in sec.controls if choices[c.name] and c.name not in off]
    singles = [{n: v} for n in free for v in choices[n] if (n, v) not in off]
    for change in singles:
        assert pc.state_key(sec, {**form, **change}) in answers, (section, change)
    if rule == "near-1":
        near = {pc.state_key(sec, {**form, **c}) for c in singles} | {pc.state_key(sec, form)}
        # Beyond those, only a reached form's refused choices (an option it disables with a reason,
        # still held when the reader gets there by another change: issue 25 item 22).
        reached = [(form, off)] + [after for c in singles
                                   if (after := pc.next_form({**form, **c}, pc.decode(
                                       data, answers[pc.state_key(sec, {**form, **c})]))) is not None]
        refused = {pc.state_key(sec, {**f, name: v}) for f, dis in reached for item in dis
                   if isinstance(item, tuple) for name, v in [item]}
        assert near <= set(answers) and set(answers) - near <= refused, (section, set(answers) - near - refused)
        return
    # pairs of changes whose first answer leaves the other fields as they were
    for a, b in itertools.combinations(free, 2):
        for va, vb in itertools.product(choices[a], choices[b]):
            if (a, va) in off or (b, vb) in off:
                continue
            after = pc.next_form({**form, a: va}, pc.decode(data, answers[pc.state_key(sec, {**form, a: va})]))
            if after is None or after[0] != {**form, a: va} or b in after[1] or (b, vb) in after[1]:
                continue
            assert pc.state_key(sec, {**form, a: va, b: vb}) in answers, (section, a, va, b, vb)
    if rule == "all" and not off and not first.get("control_state"):
        # nothing disables or resets a field: the complete product
        assert len(answers) == combos


def test_the_pool_stores_repeats_once_and_decodes_exactly():
    sec = SECTIONS["mlp"]
    big = {"t": "g", "a": {"class": "rk", "data-rank": "0"}, "c": [{"t": "text", "x": "0.5000"}] * 3}
    payloads = {
        '["a"]': {"ok": True, "result": {"figure": big, "n": 1, "m": 1.0, "b": True, "z": None}},
        '["b"]': {"ok": True, "result": {"figure": big, "n": 2, "m": "1", "b": False, "z": [1, True, 1.0]}},
    }
    answers = {k: json.dumps(v) for k, v in payloads.items()}
    data, unique = pc.build_file(sec, answers, list(answers))
    parsed = json.loads(data)
    assert unique == 2 and len(parsed["pool"]) >= 1
    assert data.count(b'"data-rank":"0"') == 1                    # the repeated subtree is written once
    for key, payload in payloads.items():
        got = pc.decode(parsed, parsed["states"][key])
        assert got == payload and json.dumps(got) == json.dumps(payload)   # 1, 1.0, True stay themselves
    with pytest.raises(ValueError):
        pc.build_file(sec, {'["x"]': json.dumps({"ok": True, "result": {"@": 1}})}, ['["x"]'])


def test_the_cache_answers_the_second_build_and_misses_after_a_change(tmp_path, monkeypatch):
    monkeypatch.setenv("TP_RESULTS_CACHE", str(tmp_path))
    first = pc.precompute(views, ["mlp", "dp-tp"], ["en", "zh"])
    assert first[("dp-tp", "en")] is first[("dp-tp", "zh")]       # one file for both languages
    # ... except where the real-ranks block prints in the page's language (issue 25 item 17)
    assert first[("mlp", "en")] is not first[("mlp", "zh")] and first[("mlp", "zh")].lang == "zh"
    calls = []

    class Views:        # the same sections, but a render that must not run on a cache hit
        sections = staticmethod(views.sections)
        __file__ = views.__file__

        @staticmethod
        def render_json(*args):
            calls.append(args)
            return views.render_json(*args)
    second = pc.precompute(Views, ["mlp", "dp-tp"], ["en", "zh"])
    assert calls == [] and second[("mlp", "en")].data == first[("mlp", "en")].data
    assert second[("dp-tp", "zh")].path == first[("dp-tp", "zh")].path
    third = pc.precompute(Views, ["mlp"], ["en"])                 # other languages: another digest
    assert calls and third[("mlp", "en")].data == first[("mlp", "en")].data
    assert len(list(tmp_path.glob("mlp.*.index.json"))) == 1      # the older entry was replaced


def test_the_build_links_each_demo_to_its_file_only_with_a_runtime(tmp_path):
    """Each demo block names its section's file, which holds the form that page opens the demo
    with ({{demo NAME control=value}} included) and every single change from it."""
    from html_tree import parse
    from tpsite.build import build
    result = build(tmp_path / "cdn", runtime="cdn")
    site = tmp_path / "cdn"
    files = {info["path"] for info in result["results"].values()}
    assert files and all((site / f).is_file() for f in files)
    seen, opened_elsewhere = 0, 0
    for page in sorted(site.glob("*/*.html")):
        doc = parse(page.read_text(encoding="utf-8"))
        for demo in doc.find_all("div", class_="demo"):
            url, name = demo.attrs["data-results"], demo.attrs["data-section"]
            assert url.startswith("../static/results/") and url[3:] in files
            data = json.loads((site / url[3:]).read_text(encoding="utf-8"))
            assert data["section"] == name
            form = {el.attrs["name"]: (el.attrs.get("value") if el.tag == "input" else
                                       next(o.attrs["value"] for o in el.find_all("option") if "selected" in o.attrs))
                    for el in demo.find("form").iter() if el.tag in ("input", "select") and "name" in el.attrs}
            sec = SECTIONS[name]
            assert pc.state_key(sec, form) in data["states"], (page.name, name, form)
            if form != pc.initial_form(sec, views.render(name, None, "en"))[0]:
                opened_elsewhere += 1
            for c in sec.controls:
                el = next(e for e in demo.find("form").iter() if e.attrs.get("name") == c.name)
                if pc.discrete_values(c) is None or "disabled" in el.attrs:
                    continue
                for v in pc.discrete_values(c):
                    off = el.tag == "select" and any("disabled" in o.attrs for o in el.find_all("option", value=v))
                    if not off:
                        assert pc.state_key(sec, {**form, c.name: v}) in data["states"], (page.name, name, c.name, v)
            seen += 1
    assert seen >= 10 and opened_elsewhere >= 1      # page 2 opens its collectives demo on AllReduce
    build(tmp_path / "none", runtime="none")
    assert not (tmp_path / "none" / "static" / "results").exists()
    assert "data-results" not in (tmp_path / "none" / "en" / "index.html").read_text(encoding="utf-8")
