"""The interface every report section implements, and what sections share.

A section is one class: `applies(bundle)` says whether its inputs are there, `render(bundle)`
returns its HTML body (tables built with `table`, figures with `report.figures`). Values
several sections need (the original trace on its virtual device, a twin synthesized from the
model, ...) are derived once per bundle here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from markupsafe import Markup, escape

from ...trace import Trace
from ..inputs import Bundle

TWIN_SEED = 1


class Section:
    """One part of the page. Subclasses set the class attributes and the two methods."""

    id: ClassVar[str]  # HTML anchor, unique
    title: ClassVar[str]
    caption: ClassVar[str] = ""  # what the reader looks at, and the paper's figure/table

    def applies(self, bundle: Bundle) -> bool:
        raise NotImplementedError

    def render(self, bundle: Bundle) -> Markup:
        raise NotImplementedError


# -- values shared by sections ----------------------------------------------------------------


def model(bundle: Bundle) -> Any:
    """The first model given, as a `Model`, or None."""
    from ...model import Model

    found = bundle.first("model")
    if found is None:
        return None
    return bundle.derived("model", lambda: Model.from_doc(found.data, str(found.path)))


def on_device(bundle: Bundle, key: str, trace: Trace | None) -> Trace | None:
    """A trace with file-level offsets moved onto its virtual device (layout.py)."""
    from ...layout import on_virtual_device

    if trace is None:
        return None
    return bundle.derived(f"device:{key}", lambda: on_virtual_device(trace)[0])


def original(bundle: Bundle) -> Trace | None:
    found = bundle.first("trace")
    return on_device(bundle, "original", found.data if found else None)


def twin(bundle: Bundle) -> Trace | None:
    """The twin given, else one synthesized from the model (as long as the original)."""
    found = bundle.first("twin")
    if found is not None:
        return on_device(bundle, "twin", found.data)
    m = model(bundle)
    if m is None:
        return None
    orig = original(bundle)
    n = orig.df.height if orig is not None else None

    def make() -> Trace:
        return m.synth(requests=n, seed=TWIN_SEED)

    return on_device(bundle, "twin", bundle.derived("synth:twin", make))


def uniform(bundle: Bundle) -> Trace | None:
    """The IOMeter-like baseline without locality: given, else synthesized from the model."""
    found = bundle.first("baseline")
    if found is not None:
        return on_device(bundle, "uniform", found.data)
    m = model(bundle)
    if m is None:
        return None
    orig = original(bundle)
    n = orig.df.height if orig is not None else None

    def make() -> Trace:
        return m.synth(requests=n, seed=TWIN_SEED, baseline="uniform")

    return on_device(bundle, "uniform", bundle.derived("synth:uniform", make))


def characterization(bundle: Bundle) -> dict[str, Any] | None:
    """The characterization given, else the original trace's."""
    found = bundle.first("characterization")
    if found is not None:
        return found.data
    trace = bundle.first("trace")
    if trace is None:
        return None
    from ...characterize import characterize

    return bundle.derived("characterization", lambda: characterize(trace.data))


def validation(bundle: Bundle) -> dict[str, Any] | None:
    """The validation given, else the original against its twin (given, or synthesized from
    the model)."""
    found = bundle.first("validation")
    if found is not None:
        return found.data
    orig, tw = bundle.first("trace"), twin(bundle)
    if orig is None or tw is None:
        return None
    from ...validate import validate

    return bundle.derived("validation", lambda: validate(orig.data, tw))


# -- HTML helpers ------------------------------------------------------------------------------


def fmt(value: Any, spec: str = ".4g", scale: float = 1.0, unit: str = "") -> str:
    """A number for a table cell; n/a for missing or NaN values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return format(value * scale, spec) + (f" {unit}" if unit else "")


def pct(value: float | None, digits: int = 1) -> str:
    return fmt(value, f".{digits}f", 100.0, "%")


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    numeric_from: int = 1,
    css: str = "",
) -> Markup:
    """An HTML table; cells are escaped unless already Markup; columns from `numeric_from`
    on are right-aligned."""
    head = "".join(
        f'<th class="{"num" if i >= numeric_from else ""}">{escape(h)}</th>'
        for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="{"num" if i >= numeric_from else ""}">{escape(c)}</td>'
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return Markup(
        f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def badge(passed: bool | None) -> Markup:
    if passed is None:
        return Markup('<span class="badge na">n/a</span>')
    return Markup(
        '<span class="badge pass">pass</span>' if passed else '<span class="badge fail">fail</span>'
    )


def figure_block(svg: str, caption: str = "") -> Markup:
    """A figure; its caption only when it says more than the section's."""
    text = f"<figcaption>{escape(caption)}</figcaption>" if caption else ""
    return Markup(f"<figure>{svg}{text}</figure>")


def note(text: str) -> Markup:
    return Markup(f'<p class="note">{escape(text)}</p>')
