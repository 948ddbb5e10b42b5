"""A page in headless Chromium (Debian's `chromium`) driven over the DevTools protocol:
load a file:// URL, collect console errors and exceptions, measure elements, screenshot."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0
ERROR_LEVELS = {"error", "assert"}


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1200, height: int = 900) -> None:
        self.width, self.height = width, height
        self.errors: list[str] = []
        self._next_id = 0

    def __enter__(self) -> Browser:
        binary = chromium_binary()
        if binary is None:
            raise RuntimeError("chromium not found (Debian package chromium)")
        self._profile = tempfile.mkdtemp(prefix="iotwin-chromium-")
        self._proc = subprocess.Popen(
            [
                binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
                "--remote-debugging-port=0", f"--user-data-dir={self._profile}",
                f"--window-size={self.width},{self.height}", "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port = self._wait_port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self._ws = websocket.create_connection(
            pages[0]["webSocketDebuggerUrl"], timeout=CALL_TIMEOUT_S, suppress_origin=True
        )
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(method)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._ws.close()
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            shutil.rmtree(self._profile, ignore_errors=True)

    def _wait_port(self) -> int:
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if marker.exists():
                lines = marker.read_text().splitlines()
                if lines and lines[0].isdigit():
                    return int(lines[0])
            if self._proc.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self._proc.returncode}")
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    def _record(self, event: dict[str, Any]) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(f"exception: {params['exceptionDetails'].get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ERROR_LEVELS:
            args = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"log: {params['entry']['text']} ({params['entry'].get('url')})")

    def _read(self) -> dict[str, Any]:
        message = json.loads(self._ws.recv())
        if "method" in message:
            self._record(message)
        return message

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self._ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = self._read()
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def load(self, path: Path) -> None:
        """Navigate to the file and wait for its load event."""
        self.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._read().get("method") == "Page.loadEventFired":
                return
        raise RuntimeError(f"{path}: no load event")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> tuple[int, int]:
        """The whole page as a PNG; returns its CSS size."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        width, height = int(size["width"]), int(size["height"])
        shot = self.call(
            "Page.captureScreenshot", format="png", captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        )  # fmt: skip
        path.write_bytes(base64.b64decode(shot["data"]))
        return width, height
