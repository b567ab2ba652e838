"""What every rank of a real run prints, computed by the simulated core.

``torchrun --standalone --nproc-per-node N -m tpmath.real EXAMPLE …`` runs one of the site's
examples on N real processes with ``torch.distributed`` (:mod:`tpmath.real`); each rank
prints its *records*, a list of ``(name, value)`` pairs, formatted by :func:`format_rank`
with the site's number formatting (:mod:`tpmath.fmt`).  This module holds everything
about the examples that does not need torch, so the page (in the browser too) and the
tests can use it:

* :data:`TOPICS` - the examples, one :class:`~tpmath.ranks.topic.Topic` record each (one module per
  topic in this package): the command line of :mod:`tpmath.real` is built from them, and
  :func:`command` writes the line the page shows;
* :func:`plan` - options validated (``TPMathError`` naming the option) into the inputs both
  the real run and the simulation use, and the world size the example needs;
* :func:`expected` - what every rank must print, from the numpy core (one entry per rank),
  plus the lines rank 0 prints after comparing with the unsharded reference.

Letters as in the core modules: tp (= n, shards) ranks, r a rank; B D F (MLP); B D O (linear,
Megatron's Y = X A with A (D, O)); V K N (vocabulary, ids per rank, positions).
Record names: ``W1[:, 0:2]`` is rank r's slice of a tensor; ``Y ← all_reduce(SUM)`` is what
every rank holds after that collective.  Values are arrays, numbers or short texts.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import shlex
from typing import Any

import numpy as np

from .. import i18n
from ..errors import TPMathError
from ..validate import as_choice, as_flag
from .collectives import NOTHING, TORCH_OPS, collective_call, collective_check, collective_verdict, reference_collective
from .row_linear import linear_names, linear_stage_keys
from .mismatch import call_text
from .mlp import MLP_RECORDS, mlp_names
from .output import (BAD, OK, check_title, format_check, format_output, format_rank, records_json, tolerance,
                     value_text, verdict)
from .topic import Opt, Topic
from .vocab_ce import VOCAB_RECORDS, vocab_check, vocab_ids, vocab_names

# The helpers the real runner (tpmath.real) shares with the simulation, one import away.
__all__ = ["BAD", "LAUNCH", "MLP_RECORDS", "MODULE", "NOTHING", "OK", "TOPICS", "TORCH_OPS",
           "VOCAB_RECORDS", "Opt", "Topic", "call_text", "check_title", "collective_call", "collective_check", "collective_verdict",
           "command", "command_for", "expected", "expected_output", "format_check", "format_output", "format_rank",
           "linear_names", "linear_stage_keys", "mlp_names", "options", "plan", "records_json",
           "reference_collective", "tolerance", "value_text", "verdict", "vocab_check", "vocab_ids", "vocab_names"]

LAUNCH = "torchrun --standalone --nproc-per-node"
MODULE = "tpmath.real"

# Every module of this package but the shared ones holds TOPICS, its topics' records.
SHARED = ("output", "topic")
TOPICS: dict[str, Topic] = {t.name: t for m in pkgutil.iter_modules(__path__) if m.name not in SHARED
                            for t in importlib.import_module(f".{m.name}", __name__).TOPICS}


def options(example: str) -> tuple[Opt, ...]:
    """The options of ``example`` (unknown names raise)."""
    return TOPICS[_example(example)].options


def _example(name: Any) -> str:
    return as_choice("example", name, tuple(TOPICS))


def _filled(example: str, given: dict) -> dict:
    """Options with defaults filled in; an unknown option name is an error."""
    opts = {o.dest: o.default for o in options(example)}
    for key, value in given.items():
        key = key.replace("-", "_")
        if key not in opts:
            raise TPMathError("unknown_option", key, example=example, option=f"--{key.replace('_', '-')}")
        if value is not None:
            opts[key] = value
    return opts


def plan(example: str, given: dict | None = None) -> dict:
    """Validate the options of ``example`` into what a run needs.

    Returns ``{"example", "world", "options", …}`` plus the example's inputs and the core's
    result (``"core"``), so the real run uses exactly the numbers the simulation used.
    """
    example = _example(example)
    opts = _filled(example, given or {})
    out = TOPICS[example].plan(opts)
    out.update(example=example, options=opts)
    return out


def expected(p: dict) -> tuple[list[list[tuple[str, Any]]], list[tuple[str, Any]]]:
    """What each rank of a correct real run prints (one list per rank) and rank 0's check lines."""
    return TOPICS[p["example"]].expected(p)


# --------------------------------------------------------------------------- command

def command(example: str, given: dict | None = None, lang: str = i18n.DEFAULT_LANG) -> str:
    """The line to type: ``torchrun … -m tpmath.real EXAMPLE`` with the non-default options
    (validated first, so the page never shows a command that would fail); ``--lang LANG``
    when the reader's language is not the command line's default."""
    return command_for(plan(example, given), lang)


def command_for(p: dict, lang: str = i18n.DEFAULT_LANG) -> str:
    """:func:`command` of an existing plan."""
    parts = [*LAUNCH.split(), str(p["world"]), "-m", MODULE, p["example"]]
    for o in options(p["example"]):
        value = p["options"][o.dest]
        if o.flag:
            parts += [f"--{o.name}"] if as_flag(o.name, value) else []
        elif value is not None and _arg(value) != o.default:
            parts += [f"--{o.name}", _arg(value)]
    parts += ["--lang", lang] if lang != i18n.DEFAULT_LANG else []
    return " ".join(shlex.quote(s) for s in parts)


def _arg(value: Any) -> str:
    """An option value as typed: numbers plainly, lists as compact JSON."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return json.dumps(np.asarray(value).tolist(), separators=(",", ":"))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def expected_output(example: str, given: dict | None = None, lang: str = i18n.DEFAULT_LANG) -> dict:
    """``{"command", "output"}``: the line to run and what its ranks print, in ``lang`` (the page's block)."""
    p = plan(example, given)
    per_rank, check = expected(p)
    return {"command": command_for(p, lang), "output": format_output(per_rank, check, lang)}
