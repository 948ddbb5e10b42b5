"""Shared helpers for the benchmarks: timing a step in a fresh process with its peak RSS,
describing the machine, and appending results to bench/RESULTS.md."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "RESULTS.md"


def machine() -> str:
    """One line naming the machine a figure came from."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def run_step(code: str, repeat: int = 1, setup: str = "") -> dict:
    """Runs `code` in a fresh Python process `repeat` times; best wall time, with that run's
    peak RSS and CPU time (user + system, all threads: on a shared machine it says more
    than the wall time).

    Each run is a new process, so peak RSS is that step's own (ru_maxrss of the child), and
    no step profits from another's warm caches inside the interpreter. `setup` (imports) runs
    before the clock starts, so steps compare work, not interpreter start-up.
    """
    runner = (
        "import time, resource, json\n"
        f"{setup}\n"
        "cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])\n"
        "t0 = time.perf_counter()\n"
        f"{code}\n"
        "dt = time.perf_counter() - t0\n"
        "use = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(json.dumps({'seconds': dt, 'peak_rss_mib': use.ru_maxrss / 1024, "
        "'cpu_seconds': use.ru_utime + use.ru_stime - cpu0}))\n"
    )
    best: dict | None = None
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", runner], check=True, capture_output=True, text=True
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        if best is None or result["seconds"] < best["seconds"]:
            best = result
    assert best is not None
    return best


def paired_ratios(numerators: list[dict], denominators: list[dict], key: str) -> list[float]:
    """One measure (`key`) of one step over another's, round by round: the two ran back to
    back, so the host's drift between rounds cancels. Benches report their median."""
    return [a[key] / b[key] for a, b in zip(numerators, denominators, strict=True)]


def write_section(title: str, body: str) -> None:
    """Replaces (or appends) the `## title` section of bench/RESULTS.md."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    header = f"## {title}"
    stamp = time.strftime("%Y-%m-%d")
    section = f"{header}\n\nRun {stamp} on {machine()}.\n\n{body.strip()}\n"
    parts = text.split("\n## ")
    kept = [p for p in parts[1:] if not p.startswith(title)]
    new = parts[0].rstrip() + "\n\n" + "".join(f"## {p.rstrip()}\n\n" for p in kept) + section
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(new)
    tmp.replace(RESULTS)
