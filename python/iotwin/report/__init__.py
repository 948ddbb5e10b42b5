"""`iotwin report`: one self-contained HTML page (tables like the papers', figures as inline
SVG) from any mix of traces, models, validations, runs and what-if results.

Inputs are recognised by content (`inputs.py`); each part of the page is a section class
(`sections/`, listed in `sections.SECTIONS`) that renders when its inputs are present. A
what-if kind is a `WhatIfSection` keyed by its JSON `"kind"` (docs/report.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from markupsafe import Markup

from .. import __version__
from ..errors import IotwinError
from ..source import atomic_output
from .inputs import Bundle, load_inputs
from .sections import SECTIONS, WHATIF_SECTIONS


@dataclass
class RenderedSection:
    id: str
    title: str
    caption: str
    body: Markup


@dataclass
class ReportResult:
    output: Path
    sections: list[str]
    skipped: list[str] = field(default_factory=list)  # directory files that were not inputs
    unknown_kinds: list[str] = field(default_factory=list)  # what-if kinds without a section


def check_inputs(bundle: Bundle) -> list[str]:
    """Check every what-if input against its section's shape; return kinds no section knows."""
    unknown = []
    for item in bundle.inputs:
        if not item.kind.startswith("whatif-"):
            continue
        section = WHATIF_SECTIONS.get(item.kind)
        if section is None:
            unknown.append(f"{item.path}: {item.kind}")
        else:
            section.check(item)
    return unknown


def render_sections(
    bundle: Bundle, progress: Callable[[str], None] | None = None
) -> list[RenderedSection]:
    out = []
    for section in SECTIONS:
        if not section.applies(bundle):
            continue
        if progress is not None:
            progress(section.title)
        out.append(
            RenderedSection(section.id, section.title, section.caption, section.render(bundle))
        )
    return out


def page(sections: list[RenderedSection], bundle: Bundle, title: str) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_template), autoescape=True, keep_trailing_newline=True
    )
    css = resources.files(__package__).joinpath("templates/report.css").read_text()
    return env.get_template("report.html.j2").render(
        title=title,
        sections=sections,
        css=Markup(css),
        version=__version__,
        inputs=len(bundle.inputs),
    )


def _template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text()


def default_title(bundle: Bundle) -> str:
    for kind in ("trace", "model", "characterization", "twin", "run"):
        item = bundle.first(kind)
        if item is not None:
            return f"iotwin report: {item.path.name}"
    return "iotwin report"


def build_report(
    inputs: list[str | Path],
    output: str | Path,
    title: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReportResult:
    """Write one self-contained HTML report of `inputs` (files or directories) to `output`."""
    output = Path(output)
    if output.suffix.lower() not in (".html", ".htm"):
        raise IotwinError(f"{output}: the report is HTML; name it something.html")
    skipped: list[str] = []
    paths = [Path(p) for p in inputs]
    bundle = load_inputs(paths, skipped)
    unknown = check_inputs(bundle)
    sections = render_sections(bundle, progress)
    html = page(sections, bundle, title or default_title(bundle))
    with atomic_output(output) as tmp:
        tmp.write_text(html, encoding="utf-8")
    return ReportResult(output, [s.id for s in sections], skipped, unknown)


__all__ = ["ReportResult", "build_report"]
