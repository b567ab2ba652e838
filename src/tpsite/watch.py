"""``python build.py --serve --watch``: rebuild on save, reload the open page.

Every 0.1 s the modification times of content/, templates/ and src/tpmath/ are compared
(standard library only).  An edit to pages' Markdown renders those pages again in place
(:func:`tpsite.build.rebuild_pages`, well under a second); anything else (templates, strings,
Python demos, views, the core) is a full build, with tpmath imported afresh.  A failed build
prints file:line and the last good site stays served.  After each build the server's
:class:`~tpsite.serve.WatchState` counts one more, and the open page (which polls it, see
serve.py) reloads.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from pathlib import Path

from . import serve
from .build import ROOT, build, rebuild_pages
from .errors import BuildError

POLL_S = 0.1


def snapshot(roots) -> dict[str, tuple[int, int]]:
    """{file: (mtime_ns, size)} under ``roots`` (editors' dotfiles, backups and caches skipped)."""
    files = {}
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            for name in names:
                if name.startswith((".", "#")) or name.endswith("~"):
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:          # deleted between the listing and the stat
                    continue
                files[path] = (st.st_mtime_ns, st.st_size)
    return files


def changed(before: dict, after: dict) -> list[Path]:
    return sorted(Path(p) for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def only_pages(paths: list[Path], content_root: Path) -> bool:
    """Every path is a page's Markdown (content/<lang>/<slug>.md)."""
    return all(p.suffix == ".md" and p.parent.parent == content_root for p in paths)


def fresh_tpmath() -> None:
    """Forget the imported tpmath modules, so the next build imports the edited sources."""
    for name in [m for m in sys.modules if m == "tpmath" or m.startswith("tpmath.")]:
        del sys.modules[name]


def where(err: Exception) -> str:
    """``file:line: `` of an error that is not a BuildError (a view raising, a syntax error)."""
    if isinstance(err, SyntaxError) and err.filename:
        return f"{err.filename}:{err.lineno}: "
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if str(ROOT) in f.filename] or frames
    return f"{ours[-1].filename}:{ours[-1].lineno}: " if ours else ""


class Watcher:
    """Builds the site again whenever its sources change; ``state`` counts the builds served."""

    def __init__(self, out: str, content_dir: str | None, templates_dir: str | None, **options):
        self.out, self.options = out, options
        self.content_root = Path(content_dir or ROOT / "content").resolve()
        self.roots = [self.content_root, Path(templates_dir or ROOT / "templates").resolve(), ROOT / "src" / "tpmath"]
        self.build_args = {"content_dir": self.content_root, "templates_dir": templates_dir}
        self.state = serve.WatchState()
        self.built = None
        self.seen = snapshot(self.roots)

    def full(self) -> bool:
        result = build(self.out, **self.build_args, **self.options, quiet=False, keep=True)
        self.built = result["built"]
        return True

    def step(self) -> None:
        """Rebuild if anything changed since the last look; print what was done or what failed."""
        now = snapshot(self.roots)
        paths = changed(self.seen, now)
        if not paths:
            return
        self.seen = now
        t0 = time.perf_counter()
        try:
            pages = None
            if self.built is not None and only_pages(paths, self.content_root):
                pages = rebuild_pages(self.built)
            if pages is None:
                if any(ROOT / "src" in p.parents for p in paths):
                    fresh_tpmath()
                self.built = None               # until a full build succeeds, every change is one
                self.full()
            else:
                print(f"rebuilt {', '.join(f'{lang}/{slug}' for lang, slug in pages) or 'nothing'} "
                      f"in {time.perf_counter() - t0:.2f} s", flush=True)
        except BuildError as err:
            print(f"build failed: {err} (still serving the last good build)", file=sys.stderr, flush=True)
            return
        except Exception as err:                 # an edited view or core module raising: same rule
            print(f"build failed: {where(err)}{type(err).__name__}: {err} (still serving the last good build)",
                  file=sys.stderr, flush=True)
            return
        self.state.version += 1

    def run(self, server) -> None:
        """Serve in a thread, look for changes here, until interrupted."""
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            while True:
                time.sleep(POLL_S)
                self.step()
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
        finally:
            server.shutdown()
            server.server_close()


def watch(out: str, host: str, port: int, content_dir: str | None = None, **options) -> int:
    """``build.py --serve --watch``: the first build, then serve and rebuild on every change."""
    watcher = Watcher(out, content_dir, None, **options)
    try:
        watcher.full()
    except BuildError as err:
        print(f"build failed: {err}", file=sys.stderr)
        return 1
    server = serve.make_server(out, host, port, watch=watcher.state)
    print(f"Serving {out} at {serve.url_of(server)}, rebuilding on every change (Ctrl+C to stop)", flush=True)
    watcher.run(server)
    return 0
