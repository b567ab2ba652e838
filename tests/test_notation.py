"""One notation across the site (issue 25, item 8).

The letters are those of Korthikanti et al. 2022 (arXiv:2205.05198, §4.2.2, Figures 4 and 5), which
Megatron Core implements in ``tensor_parallel/mappings.py``:

    f   identity forward,       AllReduce backward      copy_to_tensor_model_parallel_region
    f̄   AllReduce forward,      identity backward       reduce_from_tensor_model_parallel_region
    g   AllGather forward,      ReduceScatter backward  gather_from_sequence_parallel_region
    ḡ   ReduceScatter forward,  AllGather backward      reduce_scatter_to_sequence_parallel_region

Every built page, in both languages, is read as a reader sees it (prose with its maths, tables,
figure text, control labels) and each letter must only ever name its own pair: a clause that names
only f / f̄ never mentions AllGather or ReduceScatter, one that names only g / ḡ never AllReduce,
"forward: X" / "X forward" next to a single letter is that letter's forward collective, and a
notation table's forward and backward cells are the pair.  The references list is left out: it
describes each source in the source's own letters (the 2019 paper's g is this site's f̄, which its
entry says).  The core's communication records follow the same table.  And the row-parallel page,
whose TP size is n, labels every shard shape with n (p is the pipeline size elsewhere).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from html_tree import parse

ROOT = Path(__file__).resolve().parents[1]

# the paper's table (an independent reference: typed from the paper, not read from the code)
PAIRS = {"f": ("identity", "AllReduce"), "f̄": ("AllReduce", "identity"),
         "g": ("AllGather", "ReduceScatter"), "ḡ": ("ReduceScatter", "AllGather")}
F_FAMILY, G_FAMILY = {"f", "f̄"}, {"g", "ḡ"}
CORE_NAME = {"all-reduce": "AllReduce", "all-gather": "AllGather", "reduce-scatter": "ReduceScatter"}

# words that name what an operator does, per language (the collectives are written as NCCL does)
OPS = {"AllReduce": "AllReduce", "AllGather": "AllGather", "ReduceScatter": "ReduceScatter",
       "identity": "identity", "no operation": "identity", "恒等": "identity", "什么也不做": "identity"}
FORWARD, BACKWARD = ("forward", "前向"), ("backward", "反向")
OP_RE = "|".join(sorted(map(re.escape, OPS), key=len, reverse=True))
# a letter standing alone: not part of a word, a LaTeX command, a code name or "e.g."
SYM_RE = re.compile(r"(?<![\w\\.\-/])(f̄|ḡ|f|g)(?![\w\-/̄])")

SKIP_TAGS = {"script", "style", "code", "pre", "textarea", "nav", "head"}
BLOCKS = {"p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "summary", "caption", "figcaption", "dt", "dd",
          "th", "td", "text", "title", "option", "label", "small", "output", "button"}
PAGES = [f"{lang}/{slug}.html" for lang in ("en", "zh")
         for slug in ("index", "row-parallel", "transformer-layer", "sequence-parallel")]


def _latex_symbols(tex: str) -> str:
    """A formula's alt text with the operator letters as a reader sees them (\\bar f → f̄)."""
    tex = re.sub(r"\\(?:bar|overline)\s*\{?\s*([fg])\s*\}?", lambda m: m.group(1) + "\u0304", tex)
    return unicodedata.normalize("NFC", tex)


def _units(node, out: list, buf: list | None = None, row: list | None = None) -> None:
    """Collect the page's text units: (kind, text, cells) for each block, each table row's cells."""
    if isinstance(node, str):
        if buf is not None:
            buf.append(node)
        return
    if node.tag in SKIP_TAGS or "sources" in node.classes():
        return
    if node.tag == "math":
        if buf is not None:
            buf.append(" " + _latex_symbols(node.attrs.get("alttext", "")) + " ")
        return
    if node.tag == "tr":
        cells: list = []
        for child in node.children:
            _units(child, out, None, cells)
        out.append(("row", " | ".join(cells), cells))
        return
    if node.tag in BLOCKS:
        mine: list = []
        for child in node.children:
            _units(child, out, mine, None)
        text = unicodedata.normalize("NFC", "".join(mine))
        if row is not None and node.tag in ("td", "th"):
            row.append(text)
        else:
            out.append((node.tag, text, None))
        return
    for child in node.children:
        _units(child, out, buf, row)


def _clauses(text: str) -> list[str]:
    return [c for c in re.split(r"(?<=[.;:])\s+(?=[A-Z$\d*(“\"])|[。；]|;\s", text) if c.strip()]


def _direction_claims(clause: str) -> list[tuple[str, str]]:
    """(direction, op) pairs a clause states: "AllReduce forward", "forward: identity", "前向做 AllReduce"."""
    claims = []
    for words, d in ((FORWARD, 0), (BACKWARD, 1)):
        for w in words:
            for m in re.finditer(rf"({OP_RE})\s+(?:in the )?{w}", clause):
                claims.append((d, OPS[m.group(1)]))
            for m in re.finditer(rf"{w}(?: pass)?\s*[:：]?\s*(?:做|是|为)?\s*({OP_RE})", clause):
                claims.append((d, OPS[m.group(1)]))
    return claims


def check_text(where: str, kind: str, text: str, cells: list | None) -> list[str]:
    """Every way a unit of text could give a letter another pair; the messages name the text."""
    bad = []
    if kind == "row" and cells and len(cells) >= 3:
        sym = SYM_RE.fullmatch(re.sub(r"\s|\$", "", cells[0]))
        if sym and cells[1].strip() in OPS and cells[2].strip() in OPS:
            got = (OPS[cells[1].strip()], OPS[cells[2].strip()])
            if got != PAIRS[sym.group(1)]:
                bad.append(f"{where}: table row {text!r}: {sym.group(1)} is {PAIRS[sym.group(1)]}")
    for clause in _clauses(text):
        syms = set(SYM_RE.findall(clause))
        if not syms:
            continue
        named = {OPS[m] for m in re.findall(OP_RE, clause)}
        if syms <= F_FAMILY and named & {"AllGather", "ReduceScatter"}:
            bad.append(f"{where}: {sorted(syms)} beside AllGather/ReduceScatter: {clause!r}")
        if syms <= G_FAMILY and "AllReduce" in named:
            bad.append(f"{where}: {sorted(syms)} beside AllReduce: {clause!r}")
        # "f̄ = AllReduce" / "f̄: AllReduce" under one direction word (a figure's "forward: f̄ = AllReduce, f = identity")
        dirs = {d for words, d in ((FORWARD, 0), (BACKWARD, 1)) for w in words if w in clause}
        for m in re.finditer(rf"(f̄|ḡ|f|g)\s*[=:：]\s*({OP_RE})", clause):
            if len(dirs) == 1:
                (d,) = dirs
                if PAIRS[m.group(1)][d] != OPS[m.group(2)]:
                    bad.append(f"{where}: {m.group(0)!r} in {clause!r}")
        # "AllReduce (f̄)", "AllReduces forward (f̄)", "AllReduce（f̄）": the letter in brackets names that collective
        for m in re.finditer(rf"({OP_RE})s?(?:\s+(?:forward|backward))?\s*[(（]\s*(f̄|ḡ|f|g)\s*[)）]", clause):
            if OPS[m.group(1)] not in PAIRS[m.group(2)]:
                bad.append(f"{where}: {m.group(0)!r} in {clause!r}")
        if len(syms) == 1:
            (sym,) = syms
            for d, op in _direction_claims(clause):
                if PAIRS[sym][d] != op:
                    bad.append(f"{where}: {sym} does {PAIRS[sym][d]} {'forward' if d == 0 else 'backward'}, "
                               f"not {op}: {clause!r}")
    return bad


@pytest.fixture(scope="module")
def site(static_site):
    return static_site          # conftest.py: one --runtime none build of the real content per run


def _page_units(site: Path, page: str) -> list:
    units: list = []
    _units(parse((site / page).read_text(encoding="utf-8")), units)
    return units


@pytest.mark.parametrize("page", PAGES)
def test_each_letter_names_one_collective_pair(site, page):
    units = _page_units(site, page)
    assert any(SYM_RE.search(t) for _, t, _ in units), f"{page}: no operator letter found (the scan reads nothing)"
    bad = [msg for kind, text, cells in units for msg in check_text(page, kind, text, cells)]
    assert not bad, "\n".join(bad)


def test_the_checker_catches_the_old_wording():
    """The sentences the site used to print, each of which the scan above must refuse."""
    old = [("p", "g sits after the row-parallel layer and is an AllReduce forward, identity backward.", None),
           ("text", "forward: g = AllReduce, f = identity", None),
           ("text", "2 AllReduces forward (g), 2 backward (f)", None),
           ("row", "g | AllReduce | identity | after a row-parallel layer", ["g", "AllReduce", "identity", "x"]),
           ("row", "f̄ | AllGather | ReduceScatter", ["f̄", "AllGather", "ReduceScatter"]),
           ("p", "f̄ 位于行并行层之后，前向恒等、反向 AllReduce。", None),
           ("td", "AllReduce (g)", None)]
    for kind, text, cells in old:
        assert check_text("old", kind, unicodedata.normalize("NFC", text), cells), text
    fine = [("p", "f̄ sits after the row-parallel layer and is an AllReduce forward, identity backward.", None),
            ("text", "backward: f = AllReduce, f̄ = identity", None),
            ("p", "ḡ 前向做 ReduceScatter、反向做 AllGather。", None),
            ("p", "e.g. the logits, gathered with an AllGather", None)]
    for kind, text, cells in fine:
        assert not check_text("fine", kind, unicodedata.normalize("NFC", text), cells), text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_row_parallel_shapes_use_the_sites_tp_symbol(site, lang):
    """The TP size is t on every page (glossary.toml): every shard shape in page 2's figures and
    text divides by t, never by n (its letter until stop 36) or p."""
    units = _page_units(site, f"{lang}/row-parallel.html")
    shapes = [s for _, t, _ in units for s in re.findall(r"[BDO]/\w×[BDO]|[BDO]×[BDO]/\w", t)]
    assert len(shapes) >= 8, shapes                 # the forward and backward figures, row and column layer
    assert {s[-1] if s[1] == "×" else s[2] for s in shapes} == {"t"}, shapes
    assert not [t for _, t, _ in units if re.search(r"/p\b|/\s*p\s", t)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_notation_table_names_the_tp_size_t(lang):
    """Each content page's symbol table gives the TP size the one letter t (the newcomer read of
    stop 34 found tp, n and t on different pages)."""
    for md in sorted((ROOT / "content" / lang).glob("*.md")):
        rows = [line for line in md.read_text(encoding="utf-8").splitlines()
                if line.startswith("| $") and ("TP size" in line or "TP 大小" in line)]
        if not rows and "## " not in md.read_text(encoding="utf-8"):
            continue
        assert len(rows) == 1 and rows[0].startswith("| $t,"), (md.name, rows)


def test_core_comm_records_use_the_papers_pairs():
    """Every communication step the core reports names the operator whose pair it runs."""
    from tpmath import attention as att, comm_cost, layer, sp_layer
    steps = []
    res = att.run_attention(tp=4, heads=4, kv_heads=4, hidden=8)
    steps += [(c.operator, c.phase, c.collective) for c in res.comm]
    res = layer.run_layer(tp=2, heads=2, kv_heads=2, hidden=8)
    steps += [(c.operator, c.phase, c.collective) for c in res.comm]
    cost = comm_cost.comm_cost(2, 4, 8, 2)
    # Megatron's re-gather of a column-parallel input in backward runs g's *forward* collective
    # again (it recomputes what g gave, it is not g's backward): checked as a forward step.
    steps += [(r.operator, "forward" if r.where["key"].endswith(comm_cost.SP_REGATHER) else r.phase,
               r.collective) for r in cost.per_layer + cost.sequence_parallel.per_layer]
    sp_res = sp_layer.run_sp_layer(tp=2)
    steps += [(c.operator, "forward" if c.tensor.endswith("again") else c.phase, c.collective)
              for c in sp_res.comm if c.operator != "LN"]
    steps += [(c.operator, c.phase, c.collective) for c in sp_res.plain_tp.comm]
    letters = {op for op, _, _ in steps}
    assert letters == {"f", "f̄", "g", "ḡ"}, letters
    for op, phase, collective in steps:
        want = PAIRS[op][0 if phase == "forward" else 1]
        assert want == CORE_NAME[collective], (op, phase, collective)


# The TP size is t (the notation of Korthikanti et al. 2022 and Megatron's papers); tp is
# only the name of the control and the command-line flag.  Page 2 still writes n: its figures' shape
# labels (B×D/n …) are drawn by fig_row_linear.py, which must change with it.
TP_T_PAGES = [f"{lang}/{slug}.html" for lang in ("en", "zh") for slug in ("index", "transformer-layer", "sequence-parallel")]
TP_WORD = re.compile(r"(?<![A-Za-z\\\-])tp(?![A-Za-z\-])")
N_WORD = re.compile(r"(?<![A-Za-z\\])n(?![A-Za-z])")


@pytest.mark.parametrize("page", TP_T_PAGES)
def test_the_tp_size_is_written_t_in_every_formula(site, page):
    html = (site / page).read_text(encoding="utf-8")
    formulas = re.findall(r'<math\b[^>]*\balttext="([^"]*)"', html)
    assert sum(bool(re.search(r"(?<![A-Za-z\\])t(?![A-Za-z])", f)) for f in formulas) >= 3, page   # the scan reads them
    assert [f for f in formulas if TP_WORD.search(f)] == [], page
    if "index" not in page:          # page 1's n is the ranks of a collective (its Notation says so)
        assert [f for f in formulas if N_WORD.search(f)] == [], page


def test_the_tp_size_check_catches_the_old_letters():
    assert TP_WORD.search("H/tp") and TP_WORD.search("K < tp") and TP_WORD.search("tp\\,X")
    assert not TP_WORD.search("\\mathrm{dp-tp}") and not TP_WORD.search("stp")
    assert N_WORD.search("2\\frac{n-1}{n}") and not N_WORD.search("\\sin x") and not N_WORD.search("\\in")
