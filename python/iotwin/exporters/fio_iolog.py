"""fio iolog v3: the exact schedule `iotwin run` issues, for replay with fio --read_iolog."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .base import Exporter, ExportOptions

if TYPE_CHECKING:
    from ..model import Model
    from ..trace import Trace


class FioIolog(Exporter):
    name = "fio-iolog"
    about = "fio iolog v3: every request at its time (replay: fio --read_iolog --replay_redirect)"
    suffix = ".iolog"

    def write(self, model: Model | Trace, path: Path, options: ExportOptions) -> str:
        from .. import engine as eng

        direct = options.direct if options.direct is not None else True
        df, target = eng.schedule_for_export(
            model,
            options.requests,
            size=options.size,
            direct=direct,
            seed=options.seed,
            intensity=options.intensity,
        )
        eng.write_fio_iolog(df, path)
        return (
            f"{df.height:,} requests for a {target:,}-byte target "
            f"(fio --read_iolog={path} --replay_redirect=TARGET)"
        )
