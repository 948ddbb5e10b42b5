"""A throwaway PostgreSQL cluster driven by pgbench (TPC-B-like, as in seed 001).

The cluster lives in a temporary directory on a free loopback port with its unix socket in
that directory; it is removed afterwards. PostgreSQL refuses to run as root, so as root the
server and clients run as `nobody` (setpriv, no PAM, nothing changed on the system).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..capture import CaptureResult
from ..errors import IotwinError


def postgres_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/*/bin holding a server, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unprivileged() -> tuple[list[str], int, int]:
    """The command prefix that drops root to `nobody` (empty when not root), uid and gid."""
    if os.geteuid() != 0:
        return [], os.getuid(), os.getgid()
    user = pwd.getpwnam("nobody")
    drop = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
    return drop, user.pw_uid, user.pw_gid


@dataclass
class Cluster:
    """An initialised, stopped cluster; `script` builds a shell script that runs in it."""

    work: Path
    data: Path
    port: int
    bindir: Path
    drop: list[str]

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.bindir}:{os.environ['PATH']}", "LC_ALL": "C"}

    @property
    def conn(self) -> str:
        return f"-h {self.work} -p {self.port} -U iotwin postgres"

    def script(
        self,
        clients: int,
        seconds: int,
        scale: int = 1,
        init: bool = True,
        rate_per_client: float | None = None,
        random_seed: int | None = None,
    ) -> str:
        """Start the server, (initialise pgbench's tables,) run pgbench, stop the server.
        With `rate_per_client`, pgbench -R paces the run at clients x that many transactions
        per second (Poisson arrivals), and its report is kept in `pgbench.out` (then printed)
        to tell whether the run kept up; `random_seed` fixes pgbench's draws (accounts,
        arrival times), so runs at different client counts differ by their clients only."""
        opts = f"-p {self.port} -k {self.work} -c listen_addresses=127.0.0.1"
        lines = [
            "set -e",
            f'pg_ctl -D {self.data} -l {self.work}/server.log -w -o "{opts}" start',
        ]
        if init:
            lines.append(f"pgbench -q -i -s {scale} {self.conn}")
        rate = f"-R {clients * rate_per_client:g} " if rate_per_client else ""
        if random_seed is not None:
            rate += f"--random-seed={random_seed} "
        run = f"pgbench -T {seconds} -c {clients} -j {min(clients, 4)} {rate}{self.conn}"
        if rate_per_client:
            report = self.work / "pgbench.out"
            run = f"{run} > {report} 2>&1 || {{ cat {report}; exit 1; }}\ncat {report}"
        lines += [run, f"pg_ctl -D {self.data} -m fast -w stop"]
        return "\n".join(lines) + "\n"

    def command(
        self,
        clients: int,
        seconds: int,
        scale: int = 1,
        init: bool = True,
        rate_per_client: float | None = None,
        random_seed: int | None = None,
    ) -> list[str]:
        script = self.script(clients, seconds, scale, init, rate_per_client, random_seed)
        return [*self.drop, "sh", "-c", script]

    def initialise(self, scale: int = 1) -> None:
        """Creates pgbench's tables outside any capture (start, pgbench -i, checkpoint, stop),
        so a captured run holds the benchmark's I/O alone."""
        opts = f"-p {self.port} -k {self.work} -c listen_addresses=127.0.0.1"
        script = "\n".join(
            [
                "set -e",
                f'pg_ctl -D {self.data} -l {self.work}/server.log -w -o "{opts}" start',
                f"pgbench -q -i -s {scale} {self.conn}",
                f"pg_ctl -D {self.data} -m fast -w stop",
            ]
        )
        done = subprocess.run(
            [*self.drop, "sh", "-c", script], capture_output=True, text=True, env=self.env
        )
        if done.returncode != 0:
            raise IotwinError(f"pgbench -i failed:\n{done.stderr[-2000:]}{self.log()[-2000:]}")

    def report(self) -> tuple[float | None, float | None]:
        """(tps, mean schedule lag in ms) from a rate-limited run's pgbench report."""
        path = self.work / "pgbench.out"
        text = path.read_text() if path.exists() else ""
        tps = re.search(r"^tps = ([0-9.]+)", text, re.M)
        lag = re.search(r"schedule lag: avg ([0-9.]+)", text)
        return (
            float(tps.group(1)) if tps else None,
            float(lag.group(1)) if lag else None,
        )

    def log(self) -> str:
        path = self.work / "server.log"
        return path.read_text() if path.exists() else ""


@contextlib.contextmanager
def cluster(wal_segment_mb: int | None = None) -> Iterator[Cluster]:
    """A fresh cluster in a temporary directory, stopped and removed on exit. A larger
    `wal_segment_mb` (initdb --wal-segsize) keeps a short run's WAL in one file."""
    bindir = postgres_bindir()
    if bindir is None:
        raise IotwinError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres)")
    drop, uid, gid = unprivileged()
    # /tmp itself: an unprivileged server must be able to reach its directory
    work = Path(tempfile.mkdtemp(prefix="iotwin-pg-"))
    os.chown(work, uid, gid)
    c = Cluster(work=work, data=work / "data", port=free_port(), bindir=bindir, drop=drop)
    try:
        subprocess.run(
            [
                *drop,
                str(bindir / "initdb"),
                "-D",
                str(c.data),
                "-A",
                "trust",
                "-U",
                "iotwin",
                "--no-sync",
                *([f"--wal-segsize={wal_segment_mb}"] if wal_segment_mb else []),
            ],
            check=True,
            capture_output=True,
            env=c.env,
        )
        yield c
    finally:
        if (c.data / "postmaster.pid").exists():
            subprocess.run(
                [*drop, str(bindir / "pg_ctl"), "-D", str(c.data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                env=c.env,
            )
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def on_path(env: dict[str, str]) -> Iterator[None]:
    """Puts PostgreSQL's bin directory first on PATH while capturing (strace runs `sh`)."""
    saved = os.environ["PATH"]
    os.environ["PATH"] = env["PATH"]
    try:
        yield
    finally:
        os.environ["PATH"] = saved


def capture_pgbench(
    output: str | Path,
    clients: int = 2,
    seconds: int = 5,
    scale: int = 1,
    stream_by: str = "process",
    init_in_capture: bool = True,
    rate_per_client: float | None = None,
    wal_segment_mb: int | None = None,
    random_seed: int | None = None,
) -> PgbenchCapture:
    """Captures a whole pgbench run (server and clients) under strace into `output`; with
    `init_in_capture=False` the tables are created before the capture starts; with
    `rate_per_client` every client runs that many transactions per second (pgbench -R) and
    the result holds pgbench's tps and schedule lag."""
    from ..capture import capture

    with cluster(wal_segment_mb) as c, on_path(c.env):
        if not init_in_capture:
            c.initialise(scale)
        cmd = c.command(clients, seconds, scale, init_in_capture, rate_per_client, random_seed)
        result = capture(cmd, output, stream_by=stream_by)
        if result.exit_status != 0:
            raise IotwinError(f"pgbench run failed ({result.exit_status}):\n{c.log()[-2000:]}")
        tps, lag = c.report()
        return PgbenchCapture(**vars(result), tps=tps, lag_ms=lag)


@dataclass
class PgbenchCapture(CaptureResult):
    """A captured pgbench run; with a rate limit, pgbench's tps and mean schedule lag (a
    lag near the mean gap between a client's transactions means the run fell behind)."""

    tps: float | None = None
    lag_ms: float | None = None
