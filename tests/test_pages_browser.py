"""Every content page in both languages: real Chromium + real Pyodide 0.27.7 against
``build.py --runtime local`` served on 127.0.0.1 (the other browser tests import its helpers).

What is compared with what:
- live tables vs ``python -m tpmath … --json`` for the same inputs, formatted with
  ``tpmath.views.fmt`` (the independent check: another process, the CLI contract);
- live tables vs ``tpmath.views.render`` run here in CPython and translated with the
  builder's string tables (every cell of every table, both languages);
- live tables in the default state vs the build-time HTML, exactly.
Pages are opened once per language and slug and reused, so Pyodide boots a few times only.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tpmath import TPMathError, views
from tpsite.build import CONTENTS
from tpmath import fmt

from grid_cells import numbers, printed, shown, tint

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
BOOT_TIMEOUT_MS = 90_000
BOOT_BATCH = 3          # pages whose runtimes boot at the same time (see live_pages)
CJK = re.compile(r"[\u4e00-\u9fff]")

# Everything the page shows for one demo block: texts, and a cell holding an element (a grid, a
# rank tag) as that element's tree {t, a, c | x} (ARCHITECTURE.md, "Element trees"), without the
# cue's transient class, so it compares with the tree CPython's view returned.
SNAPSHOT_FN = """function snapshot(demo) {
  const tree = (el) => {
    const a = {};
    for (const at of el.attributes) {
      if (at.name === "hidden") continue;
      let v = at.value;
      if (at.name === "class") {
        v = v.split(/\\s+/).filter(c => c && c !== "tp-changed").join(" ");
        if (!v && at.value.includes("tp-changed")) continue;
      }
      a[at.name] = v;
    }
    const node = {t: el.localName};
    if (Object.keys(a).length) node.a = a;
    if (el.children.length) node.c = Array.from(el.children).map(tree); else node.x = el.textContent;
    return node;
  };
  const cell = (c) => c.children.length === 1 ? {el: tree(c.children[0])} :
      c.children.length ? {els: Array.from(c.children).map(tree)} : c.textContent;
  const cells = (part) => part ? Array.from(part.rows).map(r => Array.from(r.cells).map(cell)) : [];
  const tables = {};
  let scopes = true;
  demo.querySelectorAll("table[data-table]").forEach(t => {
    if (t.closest("[hidden]")) return;   // the page hides a table by its div.table-wrap
    tables[t.getAttribute("data-table")] = {
      caption: t.caption ? t.caption.textContent : null,
      head: t.tHead ? cells(t.tHead)[0] : [],
      rows: t.tBodies.length ? cells(t.tBodies[0]) : [],
      foot: cells(t.tFoot)};
    if (t.tHead) t.tHead.querySelectorAll("th").forEach(th => { scopes = scopes && th.getAttribute("scope") === "col"; });
    const bodyRows = Array.from(t.tBodies).concat(t.tFoot ? [t.tFoot] : []).flatMap(p => Array.from(p.rows));
    bodyRows.forEach(r => { const c = r.cells[0]; scopes = scopes && c.tagName === "TH" && c.getAttribute("scope") === "row"; });
  });
  const texts = (attr) => Object.fromEntries(Array.from(demo.querySelectorAll("[" + attr + "]"))
      .map(e => [e.getAttribute(attr), e.textContent]));
  const form = demo.querySelector("form.controls");
  const real = Array.from(demo.querySelectorAll("[data-real-command]")).map(c => ({
      command: c.textContent,
      output: demo.querySelector('[data-real-output="' + c.getAttribute("data-real-command") + '"]').textContent}));
  return {tables, values: texts("data-value"), notes: texts("data-note"), real, scopes,
          msg: form.querySelector(".control-msg").textContent,
          invalid: Array.from(form.elements).filter(e => e.getAttribute("aria-invalid") === "true").map(e => e.name),
          controls: Object.fromEntries(Array.from(form.elements).filter(e => e.name).map(e => [e.name, e.value])),
          busy: demo.hasAttribute("aria-busy")};
}"""
SNAPSHOT_JS = "(demo) => { " + SNAPSHOT_FN + " return snapshot(demo); }"

# Set control values the way a reader does (value + change event), wait until the section's
# result is applied (aria-busy removed), return the snapshot: one round trip.
# The page's next idle time: a figure's hidden drawing (fig-wide / fig-narrow, the one the window
# does not show) is made equal to its tree then (js/apply.js, "drawLater"); a test reads the DOM
# the page settles in.
SETTLED_FN = "const settled = () => new Promise(r => requestIdleCallback(() => r(), {timeout: 3000}));"
SET_JS = """async ([demo, values]) => { """ + SNAPSHOT_FN + SETTLED_FN + """
  const form = demo.querySelector("form.controls");
  let last = null;
  for (const [name, value] of Object.entries(values)) { form.elements[name].value = value; last = form.elements[name]; }
  (last || form.elements[0]).dispatchEvent(new Event("change", {bubbles: true}));
  if (demo.hasAttribute("aria-busy")) {
    await new Promise(resolve => {
      const obs = new MutationObserver(() => { if (!demo.hasAttribute("aria-busy")) { obs.disconnect(); resolve(); } });
      obs.observe(demo, {attributes: true, attributeFilter: ["aria-busy"]});
    });
  }
  await settled();
  return snapshot(demo);
}"""


# ---- expectations computed in CPython ---------------------------------------------------------

def load_strings(lang: str) -> dict[str, str]:
    from tpsite.content import load_strings as load  # the builder's merge of content/i18n/<lang>*.toml
    return load(ROOT / "content" / "i18n", lang)[0]


_STRINGS: dict[str, dict[str, str]] = {}


def strings(lang: str) -> dict[str, str]:
    if lang not in _STRINGS:
        _STRINGS[lang] = load_strings(lang)
    return _STRINGS[lang]


def cell_text(cell, lang: str) -> str:
    if isinstance(cell, dict) and "el" in cell:      # an element tree (grid, rank tag): its textContent
        return "".join(cell_text(n["x"], lang) for n in _nodes(cell["el"]) if "x" in n)
    if isinstance(cell, dict):
        args = {k: cell_text(v, lang) for k, v in (cell.get("args") or {}).items()}
        if cell["key"] not in strings(lang) and "as_typed" in args:   # a choice without a label (i18n.option)
            return args["as_typed"]
        text = strings(lang)[cell["key"]]
        return text.format_map(args) if args else text
    return "" if cell is None else str(cell)


def _nodes(node: dict):
    yield node
    for child in node.get("c", []):
        yield from _nodes(child)
def shown_cell(cell, lang: str):
    """A table cell as SNAPSHOT_FN reads it from the page: text, or {"el": tree} with its texts
    translated."""
    if isinstance(cell, dict) and "el" in cell:
        return {"el": _translated(cell["el"], lang)}
    return cell_text(cell, lang)


def _translated(node: dict, lang: str) -> dict:
    out = {k: v for k, v in node.items() if k in ("t", "a")}
    if "x" in node:
        out["x"] = cell_text(node["x"], lang)
    elif node.get("c"):
        out["c"] = [_translated(c, lang) for c in node["c"]]
    else:
        out["x"] = ""
    return out


def key_text(key, lang: str) -> str:
    return cell_text(key if isinstance(key, dict) else {"key": key}, lang)


def expected(section: str, controls: dict, lang: str) -> dict:
    """What the page must show: views.render in CPython, translated like the builder does."""
    result = views.render(section, controls, lang)
    tables = {}
    for name, spec in result["tables"].items():
        tables[name] = {
            "caption": None if spec.get("caption") is None else key_text(spec["caption"], lang),
            "head": [key_text(c, lang) for c in spec.get("columns", [])],
            "rows": [[shown_cell(c, lang) for c in row] for row in spec.get("rows", [])],
            "foot": [[shown_cell(c, lang) for c in row] for row in spec.get("foot", [])],
        }
    # a part the view refused (views/row_linear.py partial) keeps what the page showed: not compared
    return {"tables": tables, "values": {k: cell_text(v, lang) for k, v in result["values"].items()},
            "notes": {k: cell_text(v, lang) for k, v in result["notes"].items()},
            "real": result.get("real", []), "stale": result.get("stale") or {}}


def expected_error(section: str, controls: dict, lang: str) -> TPMathError | None:
    try:
        views.render(section, controls, lang)
    except TPMathError as err:
        return err
    return None


def cli(*args: str) -> dict:
    """``python -m tpmath ARGS --json`` in a separate process."""
    proc = subprocess.run([sys.executable, "-m", "tpmath", *args, "--json"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT,   # this checkout's tpmath, not an installed one
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def settings_for(section: str) -> list[dict]:
    """Several control settings: each select option, number bounds, and one all-changed mix."""
    sec = views.sections()[section]
    out, mix = [], {}
    for c in sec.controls:
        if c.kind == "select":
            opts = [str(o) for o in c.options if str(o) != str(c.default)]
            for o in opts[:3]:
                out.append({c.name: o})
            if opts:
                mix[c.name] = opts[-1]
        elif c.kind == "number":
            cands = [v for v in (c.min, c.max) if v is not None]
            for v in cands:
                text = fmt_control(v)
                if text != str(c.default):
                    out.append({c.name: text})
            if cands:
                mix[c.name] = fmt_control(cands[-1])
    if len(mix) > 1:
        out.append(mix)
    return out[:7]


def fmt_control(v) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def diff(where: str, got: dict, want: dict) -> list[str]:
    """Readable cell-by-cell differences between two snapshots' tables / values / notes."""
    out = []
    stale = want.get("stale") or {}
    for name in sorted(set(got["tables"]) | set(want["tables"])):
        if name in stale.get("tables", ()):
            continue
        g, w = got["tables"].get(name), want["tables"].get(name)
        if g is None or w is None:
            out.append(f"{where} table {name}: {'missing live' if g is None else 'unexpected live'}")
            continue
        for part in ("caption", "head", "rows", "foot"):
            if g[part] == w[part]:
                continue
            if part in ("rows", "foot") and len(g[part]) == len(w[part]):
                for i, (gr, wr) in enumerate(zip(g[part], w[part])):
                    for j, (gc, wc) in enumerate(zip(gr, wr)):
                        if gc != wc:
                            out.append(f"{where} {name} {part}[{i}][{j}]: live {gc!r} != {wc!r}")
                    if len(gr) != len(wr):
                        out.append(f"{where} {name} {part}[{i}]: {len(gr)} cells != {len(wr)}")
            else:
                out.append(f"{where} {name} {part}: live {g[part]!r} != {w[part]!r}")
    if not stale.get("real") and got.get("real", []) != want.get("real", []):   # command + per-rank output
        out.append(f"{where} real-ranks block: live {got.get('real')!r} != {want.get('real')!r}")
    for kind in ("values", "notes"):
        for k, v in want[kind].items():
            if got[kind].get(k, v) != v:
                out.append(f"{where} {kind[:-1]} {k}: live {got[kind][k]!r} != {v!r}")
    return out


# ---- browser helpers --------------------------------------------------------------------------

class LivePage:
    """One opened page whose runtime became ready; console errors and page errors recorded."""

    def __init__(self, page, lang: str, slug_file: str):
        self.page, self.lang, self.slug_file = page, lang, slug_file
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def _console(self, msg):
        if msg.type == "error" and not (msg.location or {}).get("url", "").endswith("favicon.ico"):
            self.errors.append(f"console: {msg.text}")

    def demo(self, section: str):
        return self.page.locator(f'.demo[data-section="{section}"]').element_handle()

    def snapshot(self, section: str) -> dict:
        return self.page.evaluate(SNAPSHOT_JS, self.demo(section))

    def set(self, section: str, values: dict) -> dict:
        return self.page.evaluate(SET_JS, [self.demo(section), values])

    def sections(self) -> list[str]:
        return self.page.eval_on_selector_all(".demo[data-section]", "els => els.map(e => e.dataset.section)")


# the deep dives and the demos' folded tables (templates/demo.html details.tables-fold), as a reader opens them
OPEN_DEEP_JS = "document.querySelectorAll('details.deep, details.tables-fold').forEach(d => { d.open = true; })"


def html_files(site: Path) -> list[tuple[str, str]]:
    """Every content page (lang, file): not the contents pages, which run no Python (no runtime to
    wait for; tests/test_contents.py and the axe test check them)."""
    return sorted((p.parent.name, p.name) for p in site.glob("*/*.html") if p.name != CONTENTS)


@pytest.fixture(scope="module")
def context(new_context):
    return new_context()


@pytest.fixture(scope="module")
def live_pages(context, site_url, built_site):
    """Every content page, opened once, runtime ready; {(lang, file): LivePage}."""
    opened = {}
    files = html_files(built_site)
    # The runtimes boot concurrently, a few pages at a time: with every page at once, a busy 2-core
    # machine can take longer than the page's own boot timeout (60 s) to start them all.
    for start in range(0, len(files), BOOT_BATCH):
        batch = []
        for lang, name in files[start:start + BOOT_BATCH]:
            page = context.new_page()
            live = LivePage(page, lang, name)
            page.goto(f"{site_url}{lang}/{name}", wait_until="domcontentloaded")
            live.static = {s: live.snapshot(s) for s in live.sections()}   # build-time DOM, before the runtime
            # A reader opens a deep dive to use its demo (closed, its controls cannot be reached and
            # nothing in it is drawn); tests/test_deep.py checks the folded page.
            page.evaluate(OPEN_DEEP_JS)
            opened[(lang, name)] = live
            batch.append((lang, name, live))
        for lang, name, live in batch:
            live.page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'",
                                        timeout=BOOT_TIMEOUT_MS)
            assert live.page.evaluate("document.documentElement.dataset.runtime") == "ready", \
                f"{lang}/{name}: runtime failed: {live.page.text_content('.runtime-status')}"
    yield opened
    for live in opened.values():
        live.page.close()


def all_demos(live_pages):
    return [(live, s) for live in live_pages.values() for s in live.sections()]


# ---- tests ------------------------------------------------------------------------------------

def test_every_page_has_demos_and_becomes_ready(live_pages):
    assert {lang for lang, _ in live_pages} == {"en", "zh"}
    demos = all_demos(live_pages)
    assert demos, "no demo blocks on any page"
    for live, _ in demos:
        status = live.page.text_content(".runtime-status")
        assert status == strings(live.lang)["runtime.ready"]


def test_default_state_live_tables_equal_build_time_tables(live_pages):
    problems = []
    for live, section in all_demos(live_pages):
        static = live.static[section]
        sec = views.sections()[section]
        first = sec.controls[0]
        # another option than the one the page opened on (a page may open a demo on its own values),
        # and one that renders (GPT-2 XL's 25 heads refuse the default tp 8)
        other = next((str(o) for o in first.options if str(o) != str(static["controls"][first.name])
                      and expected_error(section, {**static["controls"], first.name: str(o)}, live.lang) is None),
                     None)
        if other is not None:   # move away and back so the tables really are rebuilt live
            changed = live.set(section, {first.name: other})
            assert changed["tables"] != static["tables"] or changed["values"] != static["values"], section
        live_state = live.set(section, dict(static["controls"]))
        assert live_state["msg"] == "", (section, live_state["msg"])
        assert live_state["scopes"] and static["scopes"]
        problems += diff(f"{live.lang}/{live.slug_file} {section}", live_state, static)
    assert problems == [], "live (Pyodide) != build time (CPython):\n" + "\n".join(problems)


def test_live_tables_equal_cpython_render_for_several_settings(live_pages):
    checked, problems = 0, []
    for live, section in all_demos(live_pages):
        base = dict(live.static[section]["controls"])
        for setting in settings_for(section):
            controls = {**base, **setting}
            before = live.snapshot(section)
            state = live.set(section, controls)
            err = expected_error(section, controls, live.lang)
            if err is not None:   # e.g. d_in=1 with tp=2: the same message as CPython, tables kept
                assert state["msg"] == err.message(live.lang), (section, controls)
                assert state["tables"] == before["tables"]
                continue
            refused = views.render(section, controls, live.lang).get("refused")
            if refused:     # one layer refused (views/row_linear.py partial): its message, the other layer live
                assert state["msg"] == cell_text(refused["error"], live.lang), (section, controls, state["msg"])
            else:
                assert state["msg"] == "" and state["invalid"] == [], (section, controls, state["msg"])
            problems += diff(f"{live.lang} {section} {setting}", state, expected(section, controls, live.lang))
            checked += 1
        live.set(section, base)
    assert checked >= 2 * len({s for _, s in all_demos(live_pages)})
    assert problems == [], "live (Pyodide) != CPython views.render:\n" + "\n".join(problems)


# Column header i18n key -> key of one rank in `python -m tpmath mlp --json`.
MLP_COLUMNS = {"col.local_w1": "W1", "col.local_w2": "W2", "col.z": "Z", "col.h": "H",
               "col.y_partial": "Y_partial", "col.g_h": "G_H", "col.g_z": "G_Z", "col.g_w1": "G_W1",
               "col.g_w2": "G_W2", "col.g_x_partial": "G_X_partial"}


def check_mlp_against_cli(live: LivePage, controls: dict, state: dict) -> int:
    """Every rank cell of mlp-ranks and the loss against the CLI for the same tp."""
    out = cli("mlp", "--tp", controls["tp"])
    s = strings(live.lang)
    by_header = {s[k]: v for k, v in MLP_COLUMNS.items()}
    table = state["tables"]["mlp-ranks"]
    n = 0
    assert len(table["rows"]) == out["tp"] == int(controls["tp"])
    for r, row in enumerate(table["rows"]):
        assert shown(row[0]) == f"R{r}" and tint(row[0]) == r
        for header, cell in zip(table["head"][1:], row[1:]):
            if header in by_header:
                assert shown(cell) == printed(out["ranks"][r][by_header[header]]), (header, r)
                assert tint(cell) == r
                n += 1
    assert state["values"]["loss"] == fmt.num(out["reference"]["loss"])
    assert state["values"]["max-abs-err"] == fmt.err(max(out["max_abs_err"].values()))
    return n


# The seed page's six logits (typed in from the seed, not read from the code under test).
SEED_LOGITS = "[1.2,-0.5,2,0.1,1.4,-1]"


def check_vocab_ce_against_cli(live: LivePage, controls: dict, state: dict) -> int:
    """Merged values, the per-rank table and the per-token table against `vocab-ce --json`."""
    out = cli("vocab-ce", "--logits", SEED_LOGITS, "--target", controls["target"], "--shards", controls["shards"],
              "--shift", controls["shift"])
    v = state["values"]
    assert v["loss"] == fmt.num(out["loss"])
    assert v["global-max"] == fmt.num(out["global_max"])
    assert v["global-sum-exp"] == fmt.num(out["global_sum_exp"])
    assert v["target-rank"] == f"R{out['target_rank']}"
    assert v["abs-diff"] == fmt.err(out["abs_diff"])
    ranks = state["tables"]["vocab-ranks"]["rows"]
    assert len(ranks) == len(out["ranks"]) == int(controls["shards"])
    for row, r in zip(ranks, out["ranks"]):
        assert shown(row[0]) == f"R{r['rank']}"
        # JSON has no infinity: masked padding logits (−∞) come back as null.
        logits = [float("-inf") if x is None else x for x in r["logits"]]
        local_max = float("-inf") if r["local_max"] is None else r["local_max"]   # an all-padding shard
        assert [shown(c) for c in row[2:]] == [printed(logits), fmt.num(local_max), fmt.num(r["local_sum_exp"]),
                                              fmt.num(r["target_shifted"])]
        assert tint(row[2]) == r["rank"]
    tokens = state["tables"]["vocab-tokens"]["rows"]
    assert [[shown(c) for c in t[1:]] for t in tokens] == [[f"R{t['rank']}", fmt.num(t["prob"]), fmt.num(t["grad"])]
                                                          for t in out["tokens"]]
    return 5 + 4 * len(ranks) + 3 * len(tokens)


def check_collectives_against_cli(live: LivePage, controls: dict, state: dict) -> int:
    """The `collective` table against `collective NAME --inputs … --op … --root …`.

    The inputs follow the rule the page states (typed in here, not read from the code under
    test): rank r holds 10^r·[1, 2, …, L], L = 4 when n divides 4, else 6.
    """
    n = int(controls["ranks"])
    length = 4 if 4 % n == 0 else 6
    inputs = [[float(i * 10 ** r) for i in range(1, length + 1)] for r in range(n)]
    out = cli("collective", controls["collective"], "--inputs", json.dumps(inputs), "--op", controls["op"],
              "--root", controls["root"])
    nothing = strings(live.lang)["label.nothing"]
    rows = state["tables"]["collective"]["rows"]
    assert len(rows) == n
    for r, row in enumerate(rows):
        want_out = nothing if out["outputs"][r] is None else printed(out["outputs"][r])
        assert [shown(c) for c in row] == [f"R{r}", printed(inputs[r]), want_out], (controls, r)
        assert tint(row[1]) == r
    return 2 * n


def check_row_linear_against_cli(live: LivePage, controls: dict, state: dict) -> int:
    """`row-ranks` against `row-linear --tp N --x X --a A` for the X and A the page shows.

    X and A are the demo's inputs (seeded random numbers rounded to one decimal); the shards,
    partial sums, AllReduce and reference are recomputed by the CLI in another process.
    """
    given = {row[0]: numbers(row[2]).tolist() for row in state["tables"]["row-inputs"]["rows"]}
    out = cli("row-linear", "--tp", controls["tp"], "--x", json.dumps(given["X"]), "--a", json.dumps(given["A"]))
    table = state["tables"]["row-ranks"]
    assert len(table["rows"]) == int(controls["tp"])
    for row, r in zip(table["rows"], out["ranks"]):
        assert [shown(c) for c in row] == [f"R{r['rank']}", printed(r["X_shard"]), printed(r["A_shard"]),
                                           printed(r["Y_partial"])]
        assert {tint(c) for c in row} == {r["rank"]}
    assert shown(table["foot"][0][-1]) == printed(out["Y"])
    assert shown(table["foot"][1][-1]) == printed(out["reference"]["Y"])
    assert table["foot"][2][-1] == fmt.err(out["max_abs_err"]["Y"])
    return 3 * len(table["rows"]) + 3


CLI_CHECKS = {"mlp": check_mlp_against_cli, "vocab-ce": check_vocab_ce_against_cli,
              "collectives": check_collectives_against_cli, "row-linear": check_row_linear_against_cli}
EXTRA_CLI_SETTINGS = {"vocab-ce": [{"shards": "3", "target": "4", "shift": "2.5"},
                                   {"shards": "4", "target": "5", "shift": "-7.25"},
                                   {"shards": "5", "target": "0", "shift": "1000"}],
                      "collectives": [{"collective": "reduce-scatter", "ranks": "4", "op": "max"},
                                      {"collective": "gather", "ranks": "3", "root": "2"},
                                      {"collective": "all-to-all", "ranks": "4"}],
                      "row-linear": [{"tp": "4", "batch": "3", "d_in": "8", "d_out": "4", "seed": "7"}]}


def test_live_tables_equal_cli_output(live_pages):
    """The independent comparison: another process runs `python -m tpmath … --json`."""
    checked = dict.fromkeys(CLI_CHECKS, 0)
    for live, section in all_demos(live_pages):
        if section not in CLI_CHECKS:
            continue
        base = dict(live.static[section]["controls"])
        for setting in [{}] + settings_for(section)[:4] + EXTRA_CLI_SETTINGS.get(section, []):
            controls = {**base, **setting}
            state = live.set(section, controls)
            assert state["msg"] == "", (section, controls, state["msg"])
            checked[section] += CLI_CHECKS[section](live, controls, state)
        live.set(section, base)
    assert all(n > 0 for n in checked.values()), checked
    assert {s for _, s in all_demos(live_pages)} >= set(CLI_CHECKS)


def number_controls():
    return {(s, c.name): c for s, sec in views.sections().items() for c in sec.controls if c.kind == "number"}


BAD_VALUES = ["", "NaN", "1e308", "-1e308", "0", "-1", "0.5"]
BAD_VALUES_SECOND_LANGUAGE = ["", "1e308"]   # the messages' language is what is new there


def test_bad_values_show_message_in_page_language_and_keep_tables(live_pages):
    controls_by = number_controls()
    tried = errors_seen = 0
    for live, section in all_demos(live_pages):
        base = dict(live.static[section]["controls"])
        good = live.set(section, base)
        names = [n for (s, n) in controls_by if s == section]
        # a field the state disables (one a preset sets) takes no typing: a value forced into it
        # is released by the page (js/demo.js release), as issue 25 item 20 asks
        disabled = {n for n, st in views.render(section, base, live.lang).get("control_state", {}).items()
                    if st.get("disabled")}
        for name in names:
            if name in disabled:
                continue
            for bad in BAD_VALUES if live.lang == "en" else BAD_VALUES_SECOND_LANGUAGE:
                controls = {**base, name: bad}
                sent = {**controls, name: "" if bad == "NaN" else bad}   # a number input sanitises NaN to ""
                err = expected_error(section, sent, live.lang)
                state = live.set(section, controls)
                tried += 1
                if err is None:       # a valid value: tables follow it
                    assert state["msg"] == "" and state["invalid"] == []
                    want = expected(section, sent, live.lang)
                    assert state["tables"] == want["tables"] and state["real"] == want["real"]
                    good = state
                    continue
                errors_seen += 1
                assert state["msg"] == err.message(live.lang), (section, name, bad)
                if live.lang == "zh" and err.message("zh") != err.message("en"):
                    assert CJK.search(state["msg"])
                if err.field:
                    assert state["invalid"] == [err.field]
                assert state["tables"] == good["tables"], "the last good tables must stay"
                assert state["real"] == good["real"], "the last good real-ranks command must stay"
        restored = live.set(section, base)
        assert restored["msg"] == "" and restored["invalid"] == []
    if controls_by:
        assert tried and errors_seen, "no bad value was rejected"
    for live in live_pages.values():
        assert live.errors == [], live.errors


def test_named_bad_values_are_rejected(live_pages):
    """The issue's list: empty, NaN, shard count 0, target outside the vocab, shift 1e308."""
    cases = [("shards", "0"), ("shards", ""), ("target", "1000000"), ("target", "-1"), ("shift", "1e308"),
             ("shift", "")]
    seen = 0
    for live, section in all_demos(live_pages):
        base = dict(live.static[section]["controls"])
        before = live.set(section, base)
        for name, bad in cases:
            if name not in base:
                continue
            # A <select> cannot hold a value outside its options: add one, as an edited page or a
            # future free-form control would, so the value itself reaches Python.
            live.page.evaluate("""([demo, name, value]) => { const el = demo.querySelector("form").elements[name];
                if (el.tagName === "SELECT" && value !== "" && !Array.from(el.options).some(o => o.value === value)) {
                  const o = document.createElement("option"); o.value = value; o.textContent = value;
                  o.setAttribute("data-injected", ""); el.appendChild(o); } }""",
                               [live.demo(section), name, bad])
            state = live.set(section, {**base, name: bad})
            err = expected_error(section, {**base, name: bad}, live.lang)
            assert err is not None and state["msg"] == err.message(live.lang), (section, name, bad)
            if bad:
                assert bad in state["msg"] or f"{float(bad):g}" in state["msg"], state["msg"]
            assert state["invalid"] == [name]
            assert state["tables"] == before["tables"]
            seen += 1
        live.page.evaluate("(d) => d.querySelectorAll('option[data-injected]').forEach(o => o.remove())",
                           live.demo(section))
        live.set(section, base)
    assert seen, "the site promises demos with shards/target/shift controls (design.md §4)"


def test_url_state_round_trips_across_languages(new_context, site_url, built_site):
    """The issue's example link (its target 4 is now the default, so target 5 here):
    ?shards=3&target=5&shift=2.5#vocab-ce, then the language switch."""
    ctx = new_context()
    name = next((n for l, n in html_files(built_site) if l == "en"
                 and 'data-section="vocab-ce"' in (built_site / l / n).read_text(encoding="utf-8")), None)
    assert name, "no page with the vocab-ce demo"
    section, setting, anchor = "vocab-ce", {"shards": "3", "target": "5", "shift": "2.5"}, "vocab-ce"
    query = "shards=3&target=5&shift=2.5"
    page = ctx.new_page()
    live = LivePage(page, "en", name)
    page.goto(f"{site_url}en/{name}?{query}#{anchor}")
    assert page.evaluate(f"document.getElementById({anchor!r}) !== null"), "heading id vocab-ce missing"
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    page.wait_for_function("(d) => !d.hasAttribute('aria-busy')", arg=live.demo(section))
    state = live.snapshot(section)
    assert {k: state["controls"][k] for k in setting} == setting
    assert diff("url en", state, expected(section, state["controls"], "en")) == []
    assert state["values"]["loss"] == fmt.num(cli("vocab-ce", "--logits", SEED_LOGITS, "--target", "5",
                                                   "--shards", "3", "--shift", "2.5")["loss"])
    # The language switch carries query and hash; the other language restores the same state.
    assert page.get_attribute("a.lang-switch", "href").endswith(f"?{query}#{anchor}")
    page.click("a.lang-switch")
    page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    page.wait_for_function("(d) => !d.hasAttribute('aria-busy')", arg=live.demo(section))
    assert "/zh/" in page.url and page.url.endswith(f"?{query}#{anchor}")
    zh_state = live.snapshot(section)
    assert zh_state["controls"] == state["controls"]
    assert diff("url zh", zh_state, expected(section, state["controls"], "zh")) == []
    # A change rewrites the query in place (replaceState: no reload, no new history entry) ...
    entries = page.evaluate("history.length")
    live.set(section, {"shards": "4"})
    page.wait_for_function("() => location.search === '?shards=4&target=5&shift=2.5'", timeout=5000)
    assert page.evaluate("location.hash") == f"#{anchor}"
    assert page.get_attribute("a.lang-switch", "href").endswith(f"?shards=4&target=5&shift=2.5#{anchor}")
    # ... and values back at their defaults leave the query.
    live.set(section, {k: str(v) for k, v in views.defaults(section).items()})
    # url.js writes the query at most every 200 ms (browsers refuse bursts of replaceState)
    page.wait_for_function("() => location.search === ''", timeout=5000)
    assert page.evaluate("history.length") == entries
    assert live.errors == []
    page.close()


def test_runtime_blocked_keeps_static_tables_and_says_why(new_context, site_url, built_site):
    ctx = new_context()
    ctx.route("**/pyodide/**", lambda route: route.abort())
    lang, name = next((l, n) for l, n in html_files(built_site) if l == "zh")
    page = ctx.new_page()
    live = LivePage(page, lang, name)
    page.goto(f"{site_url}{lang}/{name}")
    sections = live.sections()
    static = {s: live.snapshot(s) for s in sections}
    page.wait_for_function("() => document.documentElement.dataset.runtime === 'failed'", timeout=BOOT_TIMEOUT_MS)
    s = strings(lang)
    for section in sections:
        status = page.locator(f'.demo[data-section="{section}"] .runtime-status').text_content()
        assert status == s["runtime.failed"] and CJK.search(status)
        after = live.snapshot(section)
        assert after["tables"] == static[section]["tables"]
    # A setting computed in advance still answers (issue 25 item 22: it was refused, the select
    # snapping back) ...
    section = sections[0]
    sec = views.sections()[section]
    c = sec.controls[0]
    other = next((str(o) for o in c.options if str(o) != str(c.default)), "3")
    base = dict(static[section]["controls"])
    after = page.evaluate(SET_JS, [live.demo(section), {c.name: other}])
    assert after["msg"] == "" and after["controls"][c.name] == other
    assert diff(f"{lang} {section} {c.name}={other}", after, expected(section, {**base, c.name: other}, lang)) == []
    # ... and a change nothing can compute (not computed in advance) says so and changes nothing.
    from tpsite import precompute
    section, c = next((d, c) for d in sections for c in views.sections()[d].controls
                      if c.kind == "number" and precompute.discrete_values(c) is None)
    before = live.snapshot(section)
    value = "1.25" if c.step == "any" else str(int(c.min) + 3)
    after = page.evaluate(SET_JS, [live.demo(section), {c.name: value}])
    assert after["msg"] == s["runtime.static"] and CJK.search(after["msg"])
    assert after["tables"] == before["tables"] and after["controls"] == before["controls"]
    assert page.evaluate("document.documentElement.dataset.runtime") == "failed"
    assert live.errors == []
    page.close()


def test_pydemo_runs_in_the_worker(live_pages):
    ran = 0
    for live in live_pages.values():
        page = live.page
        for demo in page.query_selector_all(".pydemo"):
            output = demo.query_selector(".pydemo-output")
            build_time = output.text_content()
            page.evaluate("(o) => { o.textContent = ''; }", output)
            demo.query_selector("button[data-run]").click()
            page.wait_for_function("(d) => !d.hasAttribute('aria-busy') && d.querySelector('.pydemo-output').textContent",
                                   arg=demo, timeout=60_000)
            assert output.text_content() == build_time
            ran += 1
    assert ran, "the row-parallel page promises a runnable {{pydemo}} block"


def test_controls_work_from_the_keyboard(live_pages):
    """Tab to a select, change it with the arrow keys, Enter in a number field does not reload."""
    live = live_pages[("en", "index.html")]
    page = live.page
    section = "mlp" if "mlp" in live.sections() else live.sections()[0]
    sec = views.sections()[section]
    select = next(c for c in sec.controls if c.kind == "select")
    base = live.set(section, dict(live.static[section]["controls"]))
    handle = page.locator(f'.demo[data-section="{section}"] select[name="{select.name}"]')
    handle.focus()
    page.keyboard.press("ArrowDown")
    page.wait_for_function("(d) => !d.hasAttribute('aria-busy')", arg=live.demo(section))
    state = live.snapshot(section)
    assert state["controls"][select.name] != base["controls"][select.name]
    assert diff("keyboard", state, expected(section, state["controls"], "en")) == []
    live.set(section, base["controls"])
    page.wait_for_function("() => location.search === ''", timeout=5000)   # url.js writes at most every 200 ms
    number = next(((s, c) for s in live.sections() for c in views.sections()[s].controls if c.kind == "number"), None)
    if number:
        field = page.locator(f'.demo[data-section="{number[0]}"] input[name="{number[1].name}"]')
        url = page.url
        field.focus()
        page.keyboard.press("Enter")
        page.wait_for_function("(d) => !d.hasAttribute('aria-busy')", arg=live.demo(number[0]))
        assert page.url.split("#")[0] == url.split("#")[0]
        assert page.evaluate("document.documentElement.dataset.runtime") == "ready"


def test_cdn_build_boots_from_the_official_cdn_url(browser, serve_dir, tmp_path_factory):
    """``--runtime cdn``: the pages point at the official CDN and work under their CSP.

    The CDN is not reachable here, so its URLs are answered from the verified local cache
    (same files, same hashes), with the CORS header the CDN sends; nothing else may load.
    """
    from tpsite import runtime as rt
    out = tmp_path_factory.mktemp("cdn") / "site"
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", "cdn", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert not (out / "pyodide").exists()
    url = serve_dir(out)
    cache = rt.cache_dir()
    served = []
    mime = {".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json",
            ".zip": "application/zip", ".whl": "application/zip"}

    def from_cache(route):
        name = route.request.url.split("?")[0].rsplit("/", 1)[-1]
        path = cache / name
        if not route.request.url.startswith(rt.CDN_BASE) or not path.is_file():
            return route.abort()
        served.append(name)
        route.fulfill(status=200, body=path.read_bytes(),
                      headers={"Content-Type": mime.get(path.suffix, "application/octet-stream"),
                               "Access-Control-Allow-Origin": "*"})

    ctx = browser.new_context()
    ctx.route("https://cdn.jsdelivr.net/**", from_cache)
    try:
        page = ctx.new_page()
        live = LivePage(page, "en", "index.html")
        page.goto(f"{url}en/index.html")
        assert page.get_attribute('meta[name="tp-pyodide"]', "content") == rt.CDN_BASE
        page.wait_for_function("() => document.documentElement.dataset.runtime !== 'loading'", timeout=BOOT_TIMEOUT_MS)
        assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
        assert {"pyodide.js", "pyodide.asm.wasm", NUMPY_WHEEL_NAME} <= set(served)
        section = live.sections()[0]
        setting = settings_for(section)[0]
        controls = {**live.snapshot(section)["controls"], **setting}
        state = live.set(section, controls)
        assert diff("cdn", state, expected(section, controls, "en")) == []
        assert live.errors == []
    finally:
        ctx.close()


NUMPY_WHEEL_NAME = "numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl"


def test_build_without_runtime_says_so(new_context, serve_dir, tmp_path_factory):
    """``--runtime none``: static pages that say in one sentence why nothing is live."""
    out = tmp_path_factory.mktemp("none") / "site"
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", "none", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    url = serve_dir(out)
    page = new_context().new_page()
    live = LivePage(page, "zh", "index.html")
    page.goto(f"{url}zh/index.html")
    page.wait_for_function("() => document.documentElement.dataset.runtime === 'failed'", timeout=10_000)
    statuses = page.eval_on_selector_all(".runtime-status", "els => els.map(e => e.textContent)")
    assert statuses and set(statuses) == {strings("zh")["runtime.none"]}
    assert live.errors == []
    page.close()


def test_no_request_left_127_0_0_1(live_pages, request_log):
    urls = request_log.urls
    assert any(u.endswith("/pyodide/pyodide.asm.wasm") for u in urls), "worker requests were not recorded"
    assert any(u.endswith("-py3-none-any.whl") for u in urls)
    assert request_log.foreign() == []
