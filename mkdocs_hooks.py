"""mkdocs hooks: the pages made from other sources when the site is built.

``index.md`` is the README (its links into ``docs/`` made relative to the site), ``configuration.md`` the
configuration reference generated from the schemas the code checks configs against (:mod:`rtctl.reference`),
``results.md`` the measured figures of ``benchmarks/RESULTS.md``.
"""
from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent


# A link as written in a Markdown file outside docs/, and as a page at the site's root sees it.
MOVED_LINKS = (("](docs/", "]("), ("](../docs/", "]("), ("](benchmarks/RESULTS.md)", "](results.md)"))


def site_links(text: str) -> str:
    """A repository-root Markdown file's links as a page at the site's root sees them."""
    for written, on_the_site in MOVED_LINKS:
        text = text.replace(written, on_the_site)
    return text


def on_files(files, config):
    from rtctl.reference import markdown

    pages = {"index.md": site_links((ROOT / "README.md").read_text()),
             "configuration.md": markdown(),
             "results.md": site_links((ROOT / "benchmarks" / "RESULTS.md").read_text())}
    for name, content in pages.items():
        files.append(File.generated(config, name, content=content))
    return files
