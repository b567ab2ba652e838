"""Results of the discrete control states of every demo section, computed at build time.

While the in-browser Python loads (or waits for the reader, on Save-Data), the page answers a
change of a select or of a small integer-like number from these results at once
(templates/static/js/results.js); the runtime takes over once it is ready.  They are the
payloads of ``tpmath.views.render_json`` -- the function the worker calls -- so a precomputed
answer is the live answer.

Which states.  A page's form is a path: the reader changes one control, the section answers,
and its ``control_state`` may set other fields (a preset fills its fields, a clamped step moves
back).  So the states are found by walking that graph from the form the static page shows:
from a form, every *discrete* control that is enabled there is set to each of its values; the
form those values send is a state; its answer gives the next form.  A form's refused choices
(options disabled with a reason) are states too: a control keeps such a value when the reader
reaches the form by changing another one, and the view's answer (a clamp and its note) is the
live one.

- discrete: a select, or a number whose min/max/step allow at most ``NUMBER_VALUES_MAX`` values;
  other numbers (continuous or huge ranges) keep the value the form holds;
- small sections (product of the discrete controls' value counts ≤ ``FULL_STATES_MAX``): every
  state reachable that way;
- larger ones: the neighbourhood of the static page -- every state at most ``NEAR_CHANGES``
  changes away from the form a page opens the demo with; when that file would exceed
  ``NEAR_BUDGET_GZIP`` compressed (sections whose answers are mostly distinct random matrices),
  one change away only.

A state is keyed by the values the form sends, verbatim, in the section's control order
(``json.dumps`` of that list): the page looks up exactly what it would send to the worker, so a
typed ``0.10`` (not a form value the build produced) simply goes to the runtime.

File (one per section, shared by every page and language that shows it when the answers do not
depend on the language; ``static/results/<section>.<hash>.json``)::

    {"section": "mlp", "controls": ["stage", "tp"],
     "states": {"[\\"forward\\",\\"2\\"]": 0, ...},      # key -> index into results
     "results": [{"ok": true, "result": {...}}, ...]}    # render_json payloads, deduplicated
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
from collections import deque
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

FULL_STATES_MAX = 64        # a section with at most this many discrete combinations: all of them
NEAR_CHANGES = 2            # otherwise: states at most this many changes from the static page
NEAR_BUDGET_GZIP = 128 * 1024   # ... or one change, if two would make a larger file (gzip)
NUMBER_VALUES_MAX = 24      # a number with at most this many values on min…max by step is discrete
RESULTS_DIR = "static/results"


@dataclass(frozen=True)
class SectionResults:
    """The precomputed results of one section (for one language, or all when ``lang`` is None)."""

    section: str
    lang: str | None
    data: bytes                  # the JSON file
    states: int                  # keys
    unique: int                  # distinct payloads
    rule: str                    # "all" states reachable, or "near-2" / "near-1" changes from the static page

    @property
    def full(self) -> bool:
        return self.rule == "all"

    @property
    def path(self) -> str:
        """Site-root-relative path; the content hash keeps a cached old file from being used."""
        digest = hashlib.sha256(self.data).hexdigest()[:12]
        suffix = f".{self.lang}" if self.lang else ""
        return f"{RESULTS_DIR}/{self.section}{suffix}.{digest}.json"


def form_value(value) -> str:
    """A control value as the page's form holds it (the template's rule: ``2``, ``0.5``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def discrete_values(control) -> tuple[str, ...] | None:
    """The values a reader picks for ``control`` (strings as the form holds them), or None."""
    if control.kind == "select":
        return tuple(form_value(o) for o in control.options)
    if control.kind != "number" or control.min is None or control.max is None:
        return None
    if not isinstance(control.step, (int, float)) or isinstance(control.step, bool) or control.step <= 0:
        return None
    lo, hi, step = (Decimal(str(v)) for v in (control.min, control.max, control.step))
    count = int((hi - lo) / step) + 1
    if count > NUMBER_VALUES_MAX:
        return None
    # Decimal steps: 0.05 * 3 is "0.15", as the browser's range input writes it.
    return tuple(_decimal_text(lo + k * step) for k in range(count))


def _decimal_text(d: Decimal) -> str:
    return str(int(d)) if d == d.to_integral_value() else format(d.normalize(), "f")


def _off(state: dict) -> frozenset:
    """What the reader cannot pick: disabled controls (their names) and disabled single options
    ((name, value) pairs: ``control_state[name]["options"]``)."""
    names = {n for n, s in state.items() if s.get("disabled")}
    options = {(n, form_value(v)) for n, s in state.items() for v in (s.get("options") or {})}
    return frozenset(names | options)


def initial_form(section, result: dict) -> tuple[dict, frozenset]:
    """The form of the static page: values (strings) and what is disabled (see :func:`_off`)."""
    state = result.get("control_state") or {}
    current = result.get("controls") or {}
    values = {}
    for c in section.controls:
        s = state.get(c.name) or {}
        values[c.name] = s["value"] if isinstance(s.get("value"), str) else form_value(current.get(c.name, c.default))
    return values, _off(state)


def next_form(sent: dict, payload: dict) -> tuple[dict, frozenset] | None:
    """The form after ``payload`` answered ``sent`` (templates/static/js/demo.js applyControlState);
    None after a refusal (the reader corrects the field first: not walked further)."""
    if not payload.get("ok"):
        return None
    state = payload["result"].get("control_state") or {}
    values = {k: (state.get(k, {}).get("value") if isinstance(state.get(k, {}).get("value"), str) else v)
              for k, v in sent.items()}
    return values, _off(state)


def set_by_view(payload: dict) -> frozenset:
    """The controls a view set (disabled with a value: a preset's fields) in an answer."""
    state = (payload.get("result") or {}).get("control_state") or {} if payload.get("ok") else {}
    return frozenset(n for n, s in state.items() if s.get("disabled") and isinstance(s.get("value"), str))


def released(sent: dict, payload: dict, owned: frozenset, base: dict) -> dict | None:
    """The values the page sends again after ``payload`` refused ``sent`` for a field the view had
    set (templates/static/js/demo.js ``release``: those fields as the static page has them), or
    None when it does not."""
    field = payload.get("field")
    if payload.get("ok") or field not in owned:
        return None
    again = {**sent, **{n: base[n] for n in owned}}
    return None if again == sent else again


def state_key(section, values: dict) -> str:
    """The key the page computes (templates/static/js/results.js): the sent values in control order."""
    return json.dumps([values[c.name] for c in section.controls], ensure_ascii=False, separators=(",", ":"))


def combinations(section) -> int:
    """How many states the discrete controls span (the product of their value counts)."""
    out = 1
    for c in section.controls:
        values = discrete_values(c)
        out *= len(values) if values else 1
    return out


def walk(section, render, lang: str, starts=((),), depth_limit: int | None = None,
         known: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """({key: payload JSON}, keys in discovery order): the states at most ``depth_limit`` changes
    (None: any number) from the static forms of ``starts``.

    ``starts``: the values pages open the demo with (``{{demo NAME control=value}}``; ``()`` is the
    section's defaults).  ``known``: answers already computed (not rendered again)."""
    choices = {c.name: discrete_values(c) for c in section.controls}
    known = known or {}

    def answer(values: dict) -> str:
        key = state_key(section, values)
        return known[key] if key in known else render(section.name, json.dumps(values), lang)

    answers: dict[str, str] = {}
    order: list[str] = []
    seen_forms = set()
    queue = deque()
    for start in starts:
        first = json.loads(render(section.name, json.dumps(dict(start)), lang))
        if not first.get("ok"):
            continue                  # refused opening values: the build reports them with file:line
        form, disabled = initial_form(section, first["result"])
        queue.append((form, disabled, 0, set_by_view(first), form))
        # The static page's own state answers too (a reader going back to it).
        key = state_key(section, form)
        if key not in answers:
            answers[key] = answer(form)
            order.append(key)
    while queue:
        form, disabled, depth, owned, base = queue.popleft()
        fkey = (state_key(section, form), disabled)
        if fkey in seen_forms:
            continue
        seen_forms.add(fkey)
        # A value this form refuses as a choice of an enabled control (an option disabled with its
        # reason) is still what that control holds when the reader reaches the form by changing
        # another one (the ring's step 12, then ranks 2): the view's answer -- clamp and note --
        # is kept for each, at any depth, so the page gives it without the runtime too.
        for c in section.controls:
            if choices[c.name] is None or c.name in disabled:
                continue
            for v in choices[c.name]:
                if (c.name, v) in disabled:
                    key = state_key(section, {**form, c.name: v})
                    if key not in answers:
                        answers[key] = answer({**form, c.name: v})
                        order.append(key)
        if depth_limit is not None and depth >= depth_limit:
            continue
        for c in section.controls:
            if choices[c.name] is None or c.name in disabled:
                continue
            for v in choices[c.name]:
                if v == form[c.name] or (c.name, v) in disabled:
                    continue
                sent = {**form, c.name: v}
                while sent is not None:
                    key = state_key(section, sent)
                    if key not in answers:
                        answers[key] = answer(sent)
                        order.append(key)
                    payload = json.loads(answers[key])
                    after = next_form(sent, payload)
                    if after is not None:
                        queue.append((after[0], after[1], depth + 1, set_by_view(payload), base))
                    sent = released(sent, payload, owned, base)
    return answers, order


def choose(section, render, lang: str, starts=((),)) -> tuple[bytes, int, int, str]:
    """The results file of a section by the rule (module docstring): (data, states, unique, rule)."""
    if combinations(section) <= FULL_STATES_MAX:
        answers, order = walk(section, render, lang, starts)
        return _made(section, answers, order, "all")
    answers, order = walk(section, render, lang, starts, NEAR_CHANGES)
    made = _made(section, answers, order, f"near-{NEAR_CHANGES}")
    if len(gzip.compress(made[0], 6)) <= NEAR_BUDGET_GZIP:
        return made
    answers, order = walk(section, render, lang, starts, 1, known=answers)
    return _made(section, answers, order, "near-1")


def _made(section, answers, order, rule):
    data, unique = build_file(section, answers, order)
    return data, len(order), unique, rule


REF = "@"              # {"@": i} is entry i of the pool (no payload has a dict with this one key)
POOL_MIN_CHARS = 24    # smaller repeated parts are left to gzip


class _Interner:
    """Subtrees that repeat across a section's payloads go into a pool once.

    Results of neighbouring states share most of their figures, table rows and cells, but one
    payload is often larger than gzip's 32 KB window, so gzip alone cannot see the repeats.
    Every dict/list gets a structural id (equal ids = equal JSON); a subtree seen at least twice
    and not tiny is written once in ``pool`` (its own repeated parts first, so references always
    point backwards) and replaced by ``{"@": index}`` wherever it occurs.
    """

    def __init__(self):
        self.ids: dict[tuple, int] = {}
        self.counts: list[int] = []
        self.sizes: list[int] = []          # length of the subtree's JSON, about
        self.of: dict[int, int] = {}        # id(object) -> structural id (the payloads stay alive)
        self.pool: list = []
        self.slot: dict[int, int] = {}

    def count(self, x) -> int | None:
        """Structural id of ``x`` (None for a scalar); counts every occurrence."""
        if isinstance(x, dict):
            if len(x) == 1 and REF in x:
                raise ValueError(f"a payload holds a dict with the single key {REF!r}")
            parts = tuple((k, self.count(v), _scalar(v)) for k, v in x.items())
            key, size = ("d",) + parts, sum(len(k) + 4 + self._size(sid, sc) for k, sid, sc in parts)
        elif isinstance(x, list):
            parts = tuple((self.count(v), _scalar(v)) for v in x)
            key, size = ("l",) + parts, sum(1 + self._size(sid, sc) for sid, sc in parts)
        else:
            return None
        sid = self.ids.get(key)
        if sid is None:
            sid = self.ids[key] = len(self.counts)
            self.counts.append(0)
            self.sizes.append(size + 2)
        self.counts[sid] += 1
        self.of[id(x)] = sid
        return sid

    def _size(self, sid, scalar) -> int:
        return self.sizes[sid] if sid is not None else len(str(scalar[1])) + 2

    def emit(self, x):
        """``x`` with its pooled subtrees replaced by references (after :meth:`count` saw all)."""
        if isinstance(x, dict):
            out = {k: self.emit(v) for k, v in x.items()}
        elif isinstance(x, list):
            out = [self.emit(v) for v in x]
        else:
            return x
        sid = self.of[id(x)]
        if self.counts[sid] < 2 or self.sizes[sid] < POOL_MIN_CHARS:
            return out
        if sid not in self.slot:
            self.slot[sid] = len(self.pool)
            self.pool.append(out)
        return {REF: self.slot[sid]}


def _scalar(v):
    """A hashable stand-in for a JSON scalar (1, 1.0 and True stay distinct); None for containers."""
    return None if isinstance(v, (dict, list)) else (type(v).__name__, v)


def build_file(section, answers: dict[str, str], order: list[str]) -> tuple[bytes, int]:
    """The JSON file of one section: payloads deduplicated, their repeated parts pooled, in
    discovery order (neighbouring states next to each other, for gzip)."""
    index: dict[str, int] = {}
    payloads: list = []
    states: dict[str, int] = {}
    for key in order:
        text = answers[key]
        if text not in index:
            index[text] = len(payloads)
            payloads.append(json.loads(text))
        states[key] = index[text]
    interner = _Interner()
    for p in payloads:
        interner.count(p)
    results = [interner.emit(p) for p in payloads]
    data = {"section": section.name, "controls": [c.name for c in section.controls], "states": states,
            "pool": interner.pool, "results": results}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), len(payloads)


def decode(data: dict, index: int):
    """Payload ``index`` of a results file with its references resolved (as results.js does)."""
    pool = data["pool"]

    def resolve(x):
        if isinstance(x, dict):
            if len(x) == 1 and REF in x:
                return resolve(pool[x[REF]])
            return {k: resolve(v) for k, v in x.items()}
        if isinstance(x, list):
            return [resolve(v) for v in x]
        return x
    return resolve(data["results"][index])


def cache_dir() -> Path | None:
    """Where computed files are kept between builds: ``$TP_RESULTS_CACHE``, else
    ``~/.cache/tp-explained/results``; ``TP_RESULTS_CACHE=off`` computes every time."""
    env = os.environ.get("TP_RESULTS_CACHE")
    if env == "off":
        return None
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tp-explained" / "results"


def inputs_digest(views, langs: list[str]) -> str:
    """Everything a results file depends on: the tpmath sources (core and views), this module,
    numpy's and Python's versions (number formatting), the languages."""
    import numpy
    h = hashlib.sha256()
    package = Path(views.__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")) + [Path(__file__).resolve()]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(f"{numpy.__version__} {sys.version_info[:2]} {','.join(langs)}".encode())
    return h.hexdigest()[:20]


def _cached(cache: Path | None, name: str, digest: str, compute) -> dict[str, SectionResults]:
    """{lang or "*": results} of a section, from the cache or computed (then stored, replacing
    that section's older entries).  ``"*"``: one file for every language."""
    index = cache / f"{name}.{digest}.index.json" if cache else None
    if index is not None and index.is_file():
        try:
            meta = json.loads(index.read_text(encoding="utf-8"))
            return {key: SectionResults(name, None if key == "*" else key,
                                        (cache / m["file"]).read_bytes(), m["states"], m["unique"], m["rule"])
                    for key, m in meta.items()}
        except (OSError, ValueError, KeyError):
            pass
    made = compute()
    if index is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            for old in cache.glob(f"{name}.*"):
                old.unlink()
            meta = {}
            for key, res in made.items():
                file = f"{name}.{digest}.{key.replace('*', 'all')}.json"
                (cache / file).write_bytes(res.data)
                meta[key] = {"file": file, "states": res.states, "unique": res.unique, "rule": res.rule}
            tmp = index.with_suffix(".tmp")
            tmp.write_text(json.dumps(meta), encoding="utf-8")
            os.replace(tmp, index)      # the index last: a half-written entry is never read
        except OSError:
            pass   # a read-only home: the build still works, only slower next time
    return made


def precompute(views, starts, langs: list[str]) -> dict[tuple[str, str], SectionResults]:
    """{(section, lang): results} for the sections shown on pages in ``langs``.

    ``starts``: {section: [opening values, ...]} (each a tuple of (control, value) pairs, ``()``
    for the defaults), or a list of section names (opened on their defaults).  A section whose
    answers do not depend on the language (cells are translation keys: the usual case) gets one
    file for every language; checked on its static states in every language.
    """
    if not isinstance(starts, dict):
        starts = {name: [()] for name in starts}
    sections = views.sections()
    cache = cache_dir()
    inputs = inputs_digest(views, langs)
    out: dict[tuple[str, str], SectionResults] = {}
    for name in sorted(starts):
        sec = sections[name]
        opened = sorted({tuple(map(tuple, o)) for o in starts[name]}) or [()]
        digest = hashlib.sha256(f"{inputs} {json.dumps(opened)}".encode()).hexdigest()[:20]

        def compute(sec=sec, name=name, opened=opened):
            statics = {lang: tuple(views.render_json(name, json.dumps(dict(o)), lang) for o in opened)
                       for lang in langs}
            shared = len(set(statics.values())) == 1
            made = {}
            for lang in ([langs[0]] if shared else langs):
                data, states, unique, rule = choose(sec, views.render_json, lang, opened)
                made["*" if shared else lang] = SectionResults(name, None if shared else lang, data,
                                                                states, unique, rule)
            return made
        made = _cached(cache, name, digest, compute)
        for lang in langs:
            out[(name, lang)] = made.get("*") or made[lang]
    return out
