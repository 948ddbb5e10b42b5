"""The interface every exporter implements, and the options they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ..model import Model


@dataclass
class ExportOptions:
    """Settings shared by the exporters; each uses the ones that make sense for its tool."""

    runtime_s: int = 60  # run length written into the job
    directory: str = "."  # where the tool's target files go
    size: int | None = None  # block-level models: target size (default: the model's capacity)
    direct: bool | None = None  # None: direct for block-level models, buffered for file-level
    ioengine: str = "psync"
    seed: int = 0  # seed of the synthetic trace features are measured on, and of the tool
    intensity: float = 1.0  # rate multiplier, as for `iotwin run`
    max_jobs: int = 64  # streams or files beyond the busiest ones are pooled into one job
    requests: int | None = None  # fio-iolog: requests to write


class Exporter(ABC):
    """One target tool: a name for the CLI, a one-line description, a default file suffix,
    and `write`, which writes the model in the tool's own format (atomically)."""

    name: ClassVar[str]
    about: ClassVar[str]
    suffix: ClassVar[str]

    @abstractmethod
    def write(self, model: Model, path: Path, options: ExportOptions) -> str:
        """Writes `model` to `path`; returns a one-line summary for the user."""
