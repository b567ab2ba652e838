"""``python -m tpmath.real EXAMPLE [options]``, started by torchrun (one process per rank).

Options are those of the topics (:data:`tpmath.ranks.TOPICS`) plus ``--backend`` and ``--json``.  Bad
options, a missing torch, a world size that does not fit, or a start without torchrun print
one ``error:`` line (from rank 0 only) and exit with status 2 (under torchrun, torchrun then
adds its own report of the processes that failed and exits with 1).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import numpy as np

from .. import ranks
from .. import i18n
from ..cmdline import Parser, help_formatter, join_negative_values, say_error, say_help, start
from ..errors import TPMathError
from . import common



def build_parser(lang: str = i18n.DEFAULT_LANG) -> argparse.ArgumentParser:
    """One sub-command per topic, options from its record (tpmath.ranks.TOPICS), the help in
    ``lang`` (content/i18n/<lang>.cli.toml, ``cli.real.*``)."""
    parser = Parser(prog="torchrun --standalone --nproc-per-node N -m tpmath.real",
                    description=say_help("cli.real.description", lang), **help_formatter(lang))
    sub = parser.add_subparsers(dest="example", parser_class=Parser, metavar="EXAMPLE",
                                help=say_help("cli.real.example", lang))
    for name, topic in ranks.TOPICS.items():
        about = say_help(f"cli.real.{name}.about", lang)
        p = sub.add_parser(name, help=about, description=about, **help_formatter(lang))
        for o in topic.options:
            text = say_help(f"cli.real.{name}.options.{o.dest}", lang, default=o.default,
                            **topic.help_args.get(o.dest, {}))
            if o.flag:
                p.add_argument(f"--{o.name}", dest=o.dest, default=None, action="store_true", help=text)
            else:
                p.add_argument(f"--{o.name}", dest=o.dest, default=None, help=text)
        p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"),
                       help=say_help("cli.real.backend", lang, default="auto"))
        p.add_argument("--json", action="store_true", help=say_help("cli.real.json", lang))
    for p in (parser, *sub.choices.values()):      # argparse's own -h
        for action in p._actions:
            if action.dest == "help":
                action.help = say_help("cli.help", lang)
    return parser


def _plan(argv: list[str], lang: str) -> tuple[argparse.Namespace, dict]:
    parser = build_parser(lang)
    if not argv or argv[0] in ("-h", "--help"):
        if os.environ.get("RANK", "0") == "0":       # once per run, not once per rank
            parser.print_help()
        raise SystemExit(0 if argv else 2)
    if any(a in ("-h", "--help") for a in argv) and os.environ.get("RANK", "0") != "0":
        raise SystemExit(0)
    args = parser.parse_args(join_negative_values(argv))
    if args.json and args.example == "mismatch":
        raise TPMathError("json_mismatch", "json")
    given = {o.dest: getattr(args, o.dest) for o in ranks.options(args.example)}
    with np.errstate(all="ignore"):           # the core reports overflow as TPMathError
        return args, ranks.plan(args.example, given)


def main(argv: list[str] | None = None) -> int:
    """Validate, join the group, run the example, print; 0 ok, 2 bad input (rank 0; the others 0)."""
    argv = sys.argv[1:] if argv is None else argv
    quiet = os.environ.get("RANK", "0") != "0"     # one error line per run, not one per rank
    # Bad input is the same on every rank, so rank 0 speaks and fails for the group.  The other
    # ranks leave quietly with 0: had they exited 2 first, torchrun would SIGTERM rank 0 before
    # it printed the one error line (seen on a loaded machine).
    refused = 0 if quiet else 2
    started = start(argv, quiet)
    if started is None:
        return refused
    lang, argv = started
    try:
        args, p = _plan(argv, lang)                      # validation first: before torch is imported
        torch = common.import_torch()
        extra = (("--backend", args.backend) if args.backend != "auto" else ()) + (("--json",) if args.json else ())
        rank, world, local = common.launch_env(p, extra, lang)
        backend = common.choose_backend(torch, args.backend, world)
    except TPMathError as err:
        if not quiet:
            say_error(err, lang)
        return refused
    timeout = p.get("timeout", 300.0)
    ctx = common.init(torch, backend, rank, world, local, timeout)
    run_example(args, p, ctx, lang)
    ctx.dist.destroy_process_group()
    return 0


def run_example(args: argparse.Namespace, p: dict, ctx: common.Ctx, lang: str) -> None:
    """Run one planned example in the joined group and print what every rank prints (the
    tests run many in one group this way: tests/real_many.py)."""
    module = importlib.import_module(f".{ranks.TOPICS[p['example']].real_module}", __package__)
    if p["example"] == "mismatch":
        module.run(p, ctx, lang)
        common.flush_and_exit(0)                   # never wait on a broken communicator
    records, check = module.run(p, ctx)
    if args.json:
        common.emit_in_rank_order(ctx, [ranks.records_json(ctx.rank, records, check, lang)])
    else:
        common.emit_in_rank_order(ctx, ranks.format_rank(ctx.rank, records, lang=lang))
        if ctx.rank == 0:
            common.say(ranks.format_check(check, lang))


if __name__ == "__main__":
    raise SystemExit(main())
