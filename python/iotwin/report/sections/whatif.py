"""Shared by the what-if sections: one section per what-if JSON kind (docs/report.md gives
each kind's shape), checked when the report loads so a wrong file gets a clear error."""

from __future__ import annotations

from typing import Any, ClassVar

from ...errors import IotwinError
from ..inputs import Bundle, Input
from .base import Section


def need(doc: Any, path: str, where: str, keys: tuple[str, ...]) -> None:
    """Raise naming the file and field when `doc` lacks one of `keys`."""
    if not isinstance(doc, dict):
        raise IotwinError(f"{path}: field '{where}': expected an object")
    for key in keys:
        if key not in doc:
            field = f"{where}.{key}" if where else key
            raise IotwinError(f"{path}: field '{field}': missing")


def numbers(values: Any, path: str, field: str, length: int | None = None) -> list[float]:
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise IotwinError(f"{path}: field '{field}': expected a list of numbers")
    expect_length(values, path, field, length)
    return [float(v) for v in values]


def expect_length(values: list, path: str, field: str, length: int | None) -> None:
    if length is not None and len(values) != length:
        raise IotwinError(f"{path}: field '{field}': {len(values)} values, expected {length}")


def number_or_null(value: Any, path: str, field: str) -> None:
    """Check one figure: a number, or null where a workload has none (no reads)."""
    if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
        raise IotwinError(f"{path}: field '{field}': expected a number or null")


def half_widths(values: Any, path: str, field: str, length: int | None = None) -> None:
    """Check 95% half-widths: numbers, or null where a figure has none (a single twin)."""
    present = [v for v in values if v is not None] if isinstance(values, list) else None
    numbers(present, path, field)
    expect_length(values, path, field, length)


class WhatIfSection(Section):
    """A section for every input of one JSON kind (the what-ifs, `sim`), checked on load."""

    kind: ClassVar[str]

    def applies(self, bundle: Bundle) -> bool:
        return bool(bundle.all(self.kind))

    def check(self, item: Input) -> None:
        raise NotImplementedError
