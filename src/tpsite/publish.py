"""What a published site needs beyond its pages: absolute URLs, link previews, crawler files.

With ``build.py --base-url URL`` (the Pages workflow passes the Pages URL) every page gets an
absolute ``<link rel="canonical">`` and absolute hreflang alternates (with ``x-default``, the
language choice), Open Graph / Twitter-card meta with ``og:url`` and ``og:image``, and the
site gets ``sitemap.xml`` (every page of every language, with its alternates) and a
``robots.txt`` naming it.  Without a base URL the site still works from any folder: links
stay relative, there is no canonical link, no ``og:url`` / ``og:image`` (they must be
absolute) and no sitemap; the build says so once.

Link-preview images (``static/preview/<lang>/<slug>.png``, 1200×630) are the page's main
figure, drawn by :mod:`tpsite.preview`: the figure named after the first demo section of
the page that has one, else the first page's (every page gets an image).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

from . import preview
from .content import Content
from .errors import BuildError

# Open Graph locale of each content language (language_TERRITORY).
OG_LOCALE = {"en": "en_US", "zh": "zh_CN"}
PREVIEW_DIR = "static/preview"
FAVICON = "static/favicon.svg"
TOUCH_ICON = "static/apple-touch-icon.png"
NOT_FOUND = "404.html"
NO_BASE_NOTE = ("note: no --base-url: links stay relative; no canonical links, og:url, og:image "
                "or sitemap.xml (pass the published URL, e.g. --base-url https://USER.github.io/REPO/)")


def normalize_base_url(url: str | None) -> str | None:
    """``https://host/path/`` (trailing slash added); None stays None; anything else is an error."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise BuildError(f"--base-url {url!r} is not an absolute http(s) URL without query or fragment "
                         "(e.g. https://user.github.io/repo/)")
    return url if url.endswith("/") else url + "/"


@dataclass(frozen=True)
class Urls:
    """Where each output file is, for links: relative to a page, or absolute under the base URL."""

    base: str | None

    def absolute(self, rel: str) -> str | None:
        """The public URL of site-relative ``rel`` (``index.html`` shown as its folder)."""
        if self.base is None:
            return None
        if rel == "index.html" or rel.endswith("/index.html"):
            rel = rel[: -len("index.html")]
        return self.base + rel

    def link(self, rel: str, root: str) -> str:
        """``rel`` as an href from a page ``root`` levels down: absolute when there is a base URL."""
        return self.absolute(rel) or root + rel


def og_locale(content: Content, lang: str) -> str:
    return OG_LOCALE.get(lang) or content.tag(lang).replace("-", "_")


def preview_path(lang: str, slug: str) -> str:
    return f"{PREVIEW_DIR}/{lang}/{slug}.png"


def page_meta(content: Content, urls: Urls, lang: str, rel: str, title: str, description: str,
              image: str, image_alt: str | None) -> dict:
    """The data of the page's canonical / Open Graph / Twitter blocks (templates/publish_head.html);
    ``image_alt`` None: the page has no preview image."""
    abs_image = urls.absolute(image) if image_alt is not None else None
    return {
        "canonical": urls.absolute(rel),
        "site_name": content.strings[lang].get("site.title", ""),
        "title": title, "description": description,
        "locale": og_locale(content, lang),
        "locale_alternates": [og_locale(content, other) for other in content.langs if other != lang],
        "url": urls.absolute(rel),
        "image": abs_image, "image_alt": image_alt,
        "image_width": preview.WIDTH, "image_height": preview.HEIGHT,
        "card": "summary_large_image" if abs_image else "summary",
    }


# ---------------------------------------------------------------- preview images

def write_previews(out: Path, content: Content, figures: dict, translators: dict,
                   css: str, fonts: list[Path] | None) -> dict[tuple[str, str], str]:
    """Render every page's preview PNG into ``out`` from its main figure (``figures[(lang, slug)]``,
    None: the first page's); return each image's alt text, the figure's title."""
    slugs = content.slugs()
    alts, svgs = {}, {}
    for lang in content.langs:
        t = translators[lang]
        for slug in slugs:
            figure = figures.get((lang, slug)) or figures.get((lang, slugs[0]))
            if figure is None:                 # a site without figures: previews without an image
                alts[(lang, slug)] = None
                continue
            key = (lang, id(figure))
            if key not in svgs:                # pages without a figure share the first page's
                svgs[key] = preview.standalone_svg(figure, t.cell, css, t("site.title"))
            png = cached_png(svgs[key], fonts)
            dest = out / preview_path(lang, slug)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(png)
            alts[(lang, slug)] = t.cell(preview.main_svg(figure)["c"][0]["x"])
    return alts


def cached_png(svg: str, fonts: list[Path] | None) -> bytes:
    """:func:`preview.rasterize`, memoised on disk by the SVG, the font files and resvg's version
    (a render takes ~0.6 s, most of it reading the CJK font)."""
    import resvg_py

    key = hashlib.sha256("\0".join([svg, resvg_py.__version__, repr(
        [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in fonts] if fonts else "system")]).encode())
    path = _cache_dir() / f"{key.hexdigest()[:32]}.png"
    if path.is_file():
        return path.read_bytes()
    png = preview.rasterize(svg, fonts)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_bytes(png)
        os.replace(tmp, path)
    except OSError:
        pass
    return png


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tp-explained" / "previews"


def write_icons(out: Path, static_dir: Path, fonts) -> None:
    """The 180×180 touch icon, rasterized from the SVG favicon (which templates/static/ holds)."""
    svg = (static_dir / "favicon.svg").read_text(encoding="utf-8")
    (out / TOUCH_ICON).write_bytes(preview.rasterize(svg, fonts, 180, 180))


# ---------------------------------------------------------------- crawler files

def sitemap(content: Content, urls: Urls) -> str:
    """sitemap.xml: the language choice and every page of every language, each with its translations."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
             'xmlns:xhtml="http://www.w3.org/1999/xhtml">',
             f"  <url><loc>{escape(urls.absolute('index.html'))}</loc></url>"]
    for slug in content.slugs():
        alternates = "".join(
            f'\n    <xhtml:link rel="alternate" hreflang={quoteattr(content.tag(lang))} '
            f"href={quoteattr(urls.absolute(lang + '/' + content.page(lang, slug).output_name))}/>"
            for lang in content.langs)
        alternates += (f'\n    <xhtml:link rel="alternate" hreflang="x-default" '
                       f"href={quoteattr(urls.absolute('index.html'))}/>")
        for lang in content.langs:
            loc = urls.absolute(f"{lang}/{content.page(lang, slug).output_name}")
            lines.append(f"  <url>\n    <loc>{escape(loc)}</loc>{alternates}\n  </url>")
    lines.append("</urlset>")
    return "\n".join(lines) + "\n"


def robots(urls: Urls) -> str:
    text = "User-agent: *\nAllow: /\n"
    if urls.base:
        text += f"\nSitemap: {urls.absolute('sitemap.xml')}\n"
    return text


def write_crawler_files(out: Path, content: Content, urls: Urls) -> None:
    (out / "robots.txt").write_text(robots(urls), encoding="utf-8")
    if urls.base:
        (out / "sitemap.xml").write_text(sitemap(content, urls), encoding="utf-8")
