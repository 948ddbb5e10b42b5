"""Exporters: a model in the formats of other benchmark tools. One file per tool behind the
small `Exporter` interface (base.py); `EXPORTERS` lists them."""

from __future__ import annotations

from ..errors import IotwinError
from .base import Exporter, ExportOptions
from .diskspd import DiskSpdProfile
from .fio import FioJob
from .fio_iolog import FioIolog
from .vdbench import VdbenchParm

EXPORTERS: dict[str, Exporter] = {
    e.name: e for e in (FioJob(), FioIolog(), DiskSpdProfile(), VdbenchParm())
}


def exporter(name: str) -> Exporter:
    try:
        return EXPORTERS[name]
    except KeyError:
        raise IotwinError(
            f"unknown exporter '{name}' (known: {', '.join(sorted(EXPORTERS))})"
        ) from None


__all__ = ["EXPORTERS", "ExportOptions", "Exporter", "exporter"]
