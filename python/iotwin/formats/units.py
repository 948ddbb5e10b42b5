"""Unit conversions shared by the text readers, as polars expressions that never raise.

Every conversion yields null for a value it cannot use (not a number, negative where that
makes no sense, too large for the canonical dtype), so the delimited machinery can name the
bad line and field, or skip it with --skip-bad.
"""

from __future__ import annotations

import re

import polars as pl

from .base import OP_READ, OP_WRITE

SECTOR = 512
NS_PER_S = 1_000_000_000

# Time units (nanoseconds per unit) and size units (bytes per unit) that readers accept.
TIME_UNITS: dict[str, int] = {
    "s": NS_PER_S,
    "ms": 1_000_000,
    "us": 1_000,
    "ns": 1,
    "ticks100ns": 100,
}
SIZE_UNITS: dict[str, int] = {"bytes": 1, "sectors": SECTOR, "blocks4k": 4096}

_DECIMAL = r"^(\d+)(?:\.(\d*))?$"
_DIGITS = re.compile(r"^\s*(\d+)")


def decimal_ns(text: pl.Expr, unit_ns: int, origin: int = 0) -> pl.Expr:
    """Nanoseconds (Int64) from a decimal string in a unit of `unit_ns` nanoseconds.

    Plain decimals ("1456135200.013118000") are converted exactly, from their digits: a
    float64 would lose the microseconds of a Unix time. `origin`, in whole units, is taken
    off before scaling so large clocks (FILETIME ticks) do not overflow int64. Anything
    else that parses as a number (signs, exponents) goes through float64.
    """
    s = text.str.strip_chars()
    groups = s.str.extract_groups(_DECIMAL)
    whole = groups.struct.field("1").cast(pl.Int64, strict=False)
    fraction = groups.struct.field("2").fill_null("").str.slice(0, 9).str.pad_end(9, "0")
    fraction_ns = fraction.cast(pl.Int64, strict=False) * unit_ns // NS_PER_S
    exact = (whole - origin) * unit_ns + fraction_ns
    approx = ((s.cast(pl.Float64, strict=False) - origin) * unit_ns).round()
    approx = pl.when(approx.is_finite()).then(approx).cast(pl.Int64, strict=False)
    return pl.when(whole.is_not_null()).then(exact).otherwise(approx)


def whole_units(text: str | None) -> int:
    """The integer part of a decimal string (0 when there is none): an origin for decimal_ns."""
    match = _DIGITS.match(text or "")
    return int(match.group(1)) if match else 0


def scaled_offset(value: pl.Expr, unit: int) -> pl.Expr:
    """Bytes (UInt64) from an integer count of `unit`-byte units; null when negative."""
    return (value.cast(pl.Int64, strict=False) * unit).cast(pl.UInt64, strict=False)


def scaled_size(value: pl.Expr, unit: int) -> pl.Expr:
    """Bytes (UInt32) from an integer count of `unit`-byte units; null if negative or >= 4 GiB."""
    return (value.cast(pl.Int64, strict=False) * unit).cast(pl.UInt32, strict=False)


def as_stream(value: pl.Expr) -> pl.Expr:
    """A stream id (UInt32) from an integer column; null when it does not fit."""
    return value.cast(pl.UInt32, strict=False)


def op_from(value: pl.Expr, reads: list, writes: list) -> pl.Expr:
    """Canonical op (UInt8) from a raw column: 0 for values in `reads`, 1 in `writes`, else null."""
    return (
        pl.when(value.is_in(reads))
        .then(pl.lit(OP_READ, pl.UInt8()))
        .when(value.is_in(writes))
        .then(pl.lit(OP_WRITE, pl.UInt8()))
        .otherwise(pl.lit(None, pl.UInt8()))
    )
