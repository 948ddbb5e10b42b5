"""What-if: SSD cache size (seed 000, Figure 7). Expected JSON (docs/report.md):
{"kind": "whatif-cache", "device": str, "sizes": [bytes, ...],
 "curves": {"original": [speedup, ...], "twin": [...], "uniform": [...]}}
Each curve has one speedup (over no cache) per size; any of the three may be absent. Optional:
"twins": N and "ranges": {"twin": {"low": [...], "high": [...]}, ...} (the range over N twins),
"ci95": {"twin": [half-width, ...], ...} (each mean's 95% interval) and "precision" (how N came
about: `whatif.precision_note`)."""

from __future__ import annotations

from markupsafe import Markup, escape

from ...errors import IotwinError
from ..figures import COLORS, bytes_label, figure, to_svg
from ..inputs import Bundle, Input
from .base import figure_block, note, table
from .whatif import WhatIfSection, half_widths, need, number_or_null, numbers

CURVES = ("original", "twin", "uniform")


def cache_svg(
    sizes: list[float],
    curves: dict[str, list[float]],
    device: str,
    ranges: dict[str, dict[str, list[float]]] | None = None,
    busy: dict[str, list[float]] | None = None,
) -> str:
    """The speedup per cache size, and beside it the device busy-time speedup (the disk work
    the cache saves) where the study has it."""
    with figure(width=11.2 if busy else 8.4, height=3.0, ncols=2 if busy else 1) as (fig, axes):
        panels = axes if busy else [axes]
        draw_curves(panels[0], sizes, curves, ranges)
        panels[0].set_xlabel(f"SSD cache size over {device}")
        panels[0].set_ylabel("speedup over no cache")
        if busy:
            draw_curves(panels[1], sizes, busy, None)
            panels[1].set_xlabel(f"SSD cache size over {device}")
            panels[1].set_ylabel("device busy-time speedup")
        return to_svg(fig, "cache speedup" + (" and busy-time speedup" if busy else ""))


def draw_curves(
    ax,
    sizes: list[float],
    curves: dict[str, list[float]],
    ranges: dict[str, dict[str, list[float]]] | None,
) -> None:
    from matplotlib.ticker import FuncFormatter

    styles = {"original": "o-", "twin": "s--", "uniform": "^:"}
    positions = list(range(len(sizes)))
    for name in CURVES:
        if name in curves:
            ax.plot(positions, curves[name], styles[name], color=COLORS[name], label=name)
        span = (ranges or {}).get(name)
        if span:  # the range over the twins (several realizations)
            ax.fill_between(positions, span["low"], span["high"], color=COLORS[name], alpha=0.2)
    ax.set_xticks(positions)
    ax.set_xticklabels([bytes_label(s) for s in sizes])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}x"))
    ax.legend(loc="upper left")


def speedup_cell(speedup: float, intervals: list[float | None] | None, i: int) -> str:
    """A mean speedup with its 95% interval's half-width, where the study gives one."""
    ci = intervals[i] if intervals else None
    return f"{speedup:.2f}x" + (f" ± {ci:.2f}" if ci else "")


class WhatIfCache(WhatIfSection):
    kind = "whatif-cache"
    id = "whatif-cache"
    title = "What-if: SSD cache size"
    caption = (
        "Simulated speedup over the device without a cache, per cache size, for the original "
        "trace, the twin and the uniform baseline (seed 000, Figure 7)."
    )

    def check(self, item: Input) -> None:
        doc, path = item.data, str(item.path)
        need(doc, path, "", ("device", "sizes", "curves"))
        sizes = numbers(doc["sizes"], path, "sizes")
        need(doc["curves"], path, "curves", ())
        if not doc["curves"]:
            raise IotwinError(f"{path}: field 'curves': no curve (expected {', '.join(CURVES)})")
        for name, values in doc["curves"].items():
            numbers(values, path, f"curves.{name}", len(sizes))
        for key in ("reads_alone_ms", "reads_alone_service_ms"):  # per curve, ms or null
            if key in doc:
                need(doc[key], path, key, ())
                for name, ms in doc[key].items():
                    number_or_null(ms, path, f"{key}.{name}")
        if "busy_curves" in doc:  # the device busy-time speedups, per curve and size
            need(doc["busy_curves"], path, "busy_curves", ())
            for name, values in doc["busy_curves"].items():
                numbers(values, path, f"busy_curves.{name}", len(sizes))
        if "ranges" in doc:
            need(doc["ranges"], path, "ranges", ())
        for name, span in doc.get("ranges", {}).items():
            need(span, path, f"ranges.{name}", ("low", "high"))
            for end in ("low", "high"):
                numbers(span[end], path, f"ranges.{name}.{end}", len(sizes))
        if "twins" in doc:
            numbers([doc["twins"]], path, "twins")
        if "ci95" in doc:  # each mean's 95% half-width, per curve and size (null: one twin)
            need(doc["ci95"], path, "ci95", ())
            for name, halves in doc["ci95"].items():
                half_widths(halves, path, f"ci95.{name}", len(sizes))

    def render(self, bundle: Bundle) -> Markup:
        parts = []
        for item in bundle.all(self.kind):
            doc = item.data
            curves = {k: [float(v) for v in vs] for k, vs in doc["curves"].items()}
            sizes = [float(s) for s in doc["sizes"]]
            parts.append(Markup(f"<h3>{escape(item.path.name)}</h3>"))
            ranges = doc.get("ranges") if doc.get("twins", 1) > 1 else None
            busy = {k: [float(v) for v in vs] for k, vs in doc.get("busy_curves", {}).items()}
            svg = cache_svg(sizes, curves, str(doc["device"]), ranges, busy or None)
            parts.append(figure_block(svg))
            intervals = doc.get("ci95", {}) if ranges else {}
            rows = [
                (bytes_label(s), *(speedup_cell(curves[n][i], intervals.get(n), i) for n in curves))
                for i, s in enumerate(sizes)
            ]
            parts.append(table(("cache size", *curves), rows, css="compact"))
            if ranges:
                from ...whatif import precision_note

                interval = "; ± the 95% interval of the mean" if intervals else ""
                parts.append(note(f"twin and uniform: {precision_note(doc, 'and uniform baselines')}"
                                  f"{interval}; the band their range"))  # fmt: skip
            parts += notes(doc)
        return Markup("").join(parts)


def notes(doc: dict) -> list[Markup]:
    """The study's lines beside its table and its cautions, as the terminal prints them."""
    from ...whatif.cache import cautions, study_lines

    badges = [Markup(f'<p class="badge fail">{escape(c)}</p>') for c in cautions(doc)]
    return [note(line) for line in study_lines(doc)] + badges
