"""The report's sections, in page order. A new section is one module and one line here."""

from __future__ import annotations

from .base import Section
from .characterization import Characterization
from .distributions import Distributions
from .fluctuation import Fluctuation
from .levels import LevelSweep
from .locality import LocalityHeatmap
from .mrc import MissRatioCurves
from .overview import Overview
from .runs import RunResults
from .sim import Simulation
from .validation import Validation
from .whatif import WhatIfSection
from .whatif_cache import WhatIfCache
from .whatif_defrag import WhatIfDefrag
from .whatif_intensity import WhatIfIntensity
from .whatif_levels import WhatIfLevels
from .whatif_stress import WhatIfStress

SECTIONS: list[Section] = [
    Overview(),
    Characterization(),
    Validation(),
    LocalityHeatmap(),
    Fluctuation(),
    Distributions(),
    MissRatioCurves(),
    LevelSweep(),
    RunResults(),
    Simulation(),
    WhatIfIntensity(),
    WhatIfCache(),
    WhatIfDefrag(),
    WhatIfLevels(),
    WhatIfStress(),
]

WHATIF_SECTIONS: dict[str, WhatIfSection] = {
    s.kind: s for s in SECTIONS if isinstance(s, WhatIfSection)
}

__all__ = ["SECTIONS", "WHATIF_SECTIONS", "Section", "WhatIfSection"]
