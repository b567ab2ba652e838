"""tpsite: the static-site builder of "tensor parallelism explained".

Pipeline (see :mod:`tpsite.build`): read every content file and string table
(:mod:`tpsite.content`), convert all formulas to MathML (:mod:`tpsite.mathml`),
compute every demo through the same view functions the browser runs
(:mod:`tpmath.views`), turn Markdown into HTML (:mod:`tpsite.markdown_ext`), render
Jinja templates (:mod:`tpsite.render`) and swap the result into ``site/``.
"""

from .errors import BuildError

__all__ = ["BuildError", "build"]


def build(*args, **kwargs):
    """Build the site; see :func:`tpsite.build.build`."""
    from .build import build as _build

    return _build(*args, **kwargs)
