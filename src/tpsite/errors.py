"""The one exception of the builder: a build error that names the file (and line)."""

from __future__ import annotations

from pathlib import Path


class BuildError(Exception):
    """Content or template problem that stops the build.

    ``str(err)`` is ``path:line: message`` (or ``path: message`` without a line) so a
    reader can jump straight to the offending place.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        super().__init__(self.location() + message)

    def location(self) -> str:
        if self.path is None:
            return ""
        return f"{self.path}:{self.line}: " if self.line else f"{self.path}: "
