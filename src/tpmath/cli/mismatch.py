"""``python -m tpmath mismatch --scenario NAME`` or ``--calls JSON``.

JSON is a list with one list of calls per rank, each call
``{"name": "all-reduce", "shape": [4], "dtype": "float32", "group": [0, 1]}``.
Prints ``ok``, ``matched``, ``completed``, ``exited`` and ``hangs`` (which rank
waits forever at which call, why, in English and Chinese).
"""

from __future__ import annotations

from ..errors import TPMathError
from ..mismatch import SCENARIOS, check_calls
from ..record import fields_of
from ..validate import as_choice

NAME = "mismatch"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"scenario": {"choices": tuple(SCENARIOS)}}


def add_arguments(parser) -> None:
    parser.add_argument("--scenario", metavar="NAME")
    parser.add_argument("--calls", metavar="JSON")


def run(args) -> dict:
    if (args.scenario is None) == (args.calls is None):
        raise TPMathError("scenario_or_calls", "scenario")
    if args.scenario is not None:
        name = as_choice("scenario", args.scenario, tuple(SCENARIOS))
        return {"scenario": name, "calls": SCENARIOS[name], **fields_of(check_calls(SCENARIOS[name]))}
    return {"scenario": None, **fields_of(check_calls(args.calls))}
