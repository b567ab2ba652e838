"""Page 3 in real Chromium + real Pyodide: the attention section live = static = CLI.

For the defaults and a few settings (GQA with replicated KV heads, MQA, a mistake, a disabled
mistake), in both languages:
- the live tables and values equal ``views.render`` run here in CPython (every cell, grids by
  their text), and at the defaults the build-time HTML;
- the numbers equal ``python -m tpmath attention … --json`` in another process (Y, G_X, the
  weight shards, the loss, the check);
- the figures the page builds live equal the trees CPython returns, element for element.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpmath import views
from tpmath import fmt
from test_pages_browser import SETTLED_FN

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
BOOT_TIMEOUT_MS = 90_000
PAGE = "transformer-layer.html"

# Tables, values, notes and figures of one demo, read from the DOM (textContent only); a
# figure as the list of its elements: [tag, {attributes}, own text].
SNAPSHOT_FN = """function snapshot(demo) {
  const tables = {};
  demo.querySelectorAll("table[data-table]").forEach(t => {
    if (t.closest("[hidden]")) return;   // the page hides a table by its div.table-wrap
    const rows = part => part ? Array.from(part.children).map(r => Array.from(r.children).map(c => c.textContent)) : [];
    tables[t.getAttribute("data-table")] = {head: rows(t.tHead)[0] || [], rows: rows(t.tBodies[0]), foot: rows(t.tFoot)};
  });
  const texts = attr => Object.fromEntries(Array.from(demo.querySelectorAll("[" + attr + "]"))
      .map(e => [e.getAttribute(attr), e.textContent]));
  const figures = {};
  demo.querySelectorAll("figure[data-figure]").forEach(f => {
    const out = [];
    const walk = e => {
      const attrs = {};
      for (const a of e.attributes) {
        // the "what changed" cue's class is the reader's highlight for a moment, not the figure
        const v = a.name === "class" ? a.value.split(/\\s+/).filter(c => c && c !== "tp-changed").join(" ") : a.value;
        if (a.name === "class" && v === "" && a.value.includes("tp-changed")) continue;
        attrs[a.name] = v;
      }
      const own = Array.from(e.childNodes).filter(n => n.nodeType === 3).map(n => n.textContent).join("");
      out.push([e.tagName.toLowerCase(), attrs, own]);
      Array.from(e.children).forEach(walk);
    };
    walk(f);
    figures[f.getAttribute("data-figure")] = out;
  });
  const form = demo.querySelector("form.controls");
  return {tables, figures, values: texts("data-value"), notes: texts("data-note"),
          msg: form.querySelector(".control-msg").textContent,
          options: Array.from(form.querySelectorAll("option")).map(o => [o.value, o.disabled, o.textContent]),
          controls: Object.fromEntries(Array.from(form.elements).filter(e => e.name).map(e => [e.name, e.value]))};
}"""
SET_JS = """async ([demo, values]) => { """ + SNAPSHOT_FN + SETTLED_FN + """
  const form = demo.querySelector("form.controls");
  let last = null;
  for (const [name, value] of Object.entries(values)) { form.elements[name].value = value; last = form.elements[name]; }
  last.dispatchEvent(new Event("change", {bubbles: true}));
  await new Promise(resolve => {
    const done = () => !demo.hasAttribute("aria-busy") && demo.getAttribute("data-state") !== "pending";
    if (done()) { setTimeout(resolve, 50); return; }
    const obs = new MutationObserver(() => { if (done()) { obs.disconnect(); resolve(); } });
    obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy", "data-state"]});
  });
  await settled();
  return snapshot(demo);
}"""
SNAP_JS = "(demo) => { " + SNAPSHOT_FN + " return snapshot(demo); }"

SETTINGS = [
    {},                                                                   # the defaults
    {"tp": "4", "heads": "8", "kv_heads": "2"},                           # KV heads replicated on 2 ranks
    {"tp": "4", "heads": "4", "kv_heads": "1", "causal": "off", "seq": "6"},   # MQA
    {"tp": "4", "heads": "8", "kv_heads": "2", "mistake": "kv-not-replicated"},
    {"tp": "2", "heads": "4", "kv_heads": "2", "mistake": "kv-grad-not-summed"},   # disabled: K ≥ tp
    {"tp": "8", "heads": "8", "kv_heads": "8", "hidden": "16", "seed": "7"},
]


def _strings(lang):
    from tpsite.content import load_strings
    return load_strings(ROOT / "content" / "i18n", lang)[0]


def cell_text(cell, s) -> str:
    if isinstance(cell, dict) and "el" in cell:
        return "".join(n["x"] if isinstance(n.get("x"), str) else cell_text(n.get("x"), s)
                       for n in _walk(cell["el"]) if "x" in n)
    if isinstance(cell, dict):
        args = {k: cell_text(v, s) for k, v in (cell.get("args") or {}).items()}
        return s[cell["key"]].format_map(args) if args else s[cell["key"]]
    return "" if cell is None else str(cell)


def _walk(node):
    yield node
    for c in node.get("c", []):
        yield from _walk(c)


def expected(controls: dict, lang: str) -> dict:
    s = _strings(lang)
    res = views.render("attention", controls, lang)
    tables = {name: {"head": [cell_text({"key": c} if isinstance(c, str) else c, s) for c in t["columns"]],
                     "rows": [[cell_text(c, s) for c in row] for row in t["rows"]],
                     "foot": [[cell_text(c, s) for c in row] for row in t["foot"]]}
              for name, t in res["tables"].items()}
    figures = {name: [[n["t"], n.get("a", {}), cell_text(n["x"], s) if "x" in n else ""] for n in _walk(fig)]
               for name, fig in res["figures"].items()}
    off = res.get("control_state", {}).get("mistake", {}).get("options", {})
    options = []
    for c in views.sections()["attention"].controls:
        for o in c.options:
            o = str(o)
            key = f"opt.{c.name.replace('-', '_')}.{o.replace('-', '_')}"
            label = s.get(key, o)
            why = off.get(o) if c.name == "mistake" else None
            shown = label if why is None else s["site.option_off"].format(label=label, why=cell_text(why, s))
            options.append([o, why is not None, shown])
    return {"tables": tables, "figures": figures, "controls": res["controls"], "options": options,
            "values": {k: cell_text(v, s) for k, v in res["values"].items()},
            "notes": {k: cell_text(v, s) for k, v in res["notes"].items()}}


def cell_diff(got: dict, want: dict) -> list[str]:
    """The differing cells of two table snapshots, readably."""
    out = []
    for name in sorted(set(got) | set(want)):
        g, w = got.get(name), want.get(name)
        if g is None or w is None:
            out.append(f"{name}: {'missing' if g is None else 'unexpected'}")
            continue
        for part in ("head", "rows", "foot"):
            for i, (gr, wr) in enumerate(zip(g[part], w[part])):
                out += [f"{name} {part}[{i}][{j}]: {gc!r} != {wc!r}" for j, (gc, wc) in enumerate(zip(gr, wr)) if gc != wc]
            if len(g[part]) != len(w[part]):
                out.append(f"{name} {part}: {len(g[part])} rows != {len(w[part])}")
    return out


def cli(controls: dict) -> dict:
    c = {**views.defaults("attention"), **controls}
    args = ["attention", "--tp", c["tp"], "--heads", c["heads"], "--kv-heads", c["kv_heads"], "--seq", c["seq"],
            "--batch", "1", "--hidden", c["hidden"], "--seed", str(c["seed"]), "--mistake", c["mistake"]]
    if c["causal"] == "on":
        args.append("--causal")
    proc = subprocess.run([sys.executable, "-m", "tpmath", *args, "--json"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def grid_text(m) -> str:
    """A matrix as a grid cell's textContent: the formatted numbers one after the other."""
    a = np.asarray(m, dtype=float)
    return "".join(fmt.num(x) for x in a.reshape(-1, a.shape[-1]).ravel())


@pytest.fixture(scope="module")
def pages(new_context, site_url):
    ctx = new_context()
    out = {}
    for lang in ("en", "zh"):
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.goto(f"{site_url}{lang}/{PAGE}", wait_until="domcontentloaded")
        demo = page.locator('.demo[data-section="attention"]').element_handle()
        static = page.evaluate(SNAP_JS, demo)
        out[lang] = (page, demo, static, errors)
    for page, *_ in out.values():
        page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
        assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
    yield out
    for page, *_ in out.values():
        page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_static_page_is_the_cpython_render(pages, lang):
    _, _, static, _ = pages[lang]
    want = expected({}, lang)
    assert static["tables"] == want["tables"]
    assert static["values"] == want["values"] and static["notes"] == want["notes"]
    assert static["figures"] == want["figures"]
    assert static["options"] == want["options"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_live_equals_static_equals_cli(pages, lang):
    page, demo, static, errors = pages[lang]
    defaults = {k: str(v) for k, v in views.defaults("attention").items()}
    for setting in SETTINGS + [{}]:        # ends where it began: live defaults = build-time page
        controls = {**defaults, **setting}
        state = page.evaluate(SET_JS, [demo, controls])
        want = expected(controls, lang)
        assert state["msg"] == "", (setting, state["msg"])
        assert cell_diff(state["tables"], want["tables"]) == [], setting
        assert state["values"] == want["values"] and state["notes"] == want["notes"], setting
        assert state["figures"] == want["figures"], setting
        assert state["options"] == want["options"], setting          # mistakes that change nothing: disabled
        shown = want["controls"]
        assert state["controls"]["mistake"] == shown["mistake"]     # a disabled mistake is set back
        # the numbers against the command line, another process
        out = cli({**controls, "mistake": shown["mistake"]})
        rows = {(r[0], r[1]): r for r in state["tables"]["att-y"]["rows"]}
        s = _strings(lang)
        ours, ref = s["label.att_tp_result"], s["label.reference"]
        assert rows[("Y", ours)][2] == grid_text(out["sharded"]["Y"])
        assert rows[("Y", ref)][2] == grid_text(out["reference"]["Y"])
        assert rows[("G_X", ours)][2] == grid_text(out["sharded"]["G_X"])
        for r, row in enumerate(state["tables"]["att-shards"]["rows"]):
            assert row[1:] == [grid_text(out["ranks"][r][w]) for w in ("W_q", "W_k", "W_v", "W_o")]
        assert state["values"]["loss"] == fmt.num(out["sharded"]["loss"])
        assert state["values"]["reference-loss"] == fmt.num(out["reference"]["loss"])
        # the largest measured error (not the tolerance), its digits the command line's: the core
        # computes in a fixed order, so Pyodide and CPython measure the same error
        assert state["values"]["max-abs-err"] == fmt.err(max(out["max_abs_err"].values()))
    for part in ("tables", "values", "notes", "figures"):      # back at the defaults: the build-time page
        assert state[part] == static[part], part
    assert errors == []


def test_bad_head_split_names_the_control_and_keeps_the_tables(pages):
    page, demo, _, _ = pages["en"]
    before = page.evaluate(SNAP_JS, demo)
    state = page.evaluate(SET_JS, [demo, {**before["controls"], "tp": "4", "heads": "2"}])
    assert "heads=2 is not divisible by tp=4" in state["msg"] or "heads" in state["msg"]
    assert state["tables"] == before["tables"]
    # the figures are kept, marked as no longer matching the controls (issue 25 item 6)
    assert all(f[0][1].pop("data-stale", None) == "" for f in state["figures"].values())
    assert state["figures"] == before["figures"]
    page.evaluate(SET_JS, [demo, before["controls"]])
