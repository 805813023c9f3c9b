"""Make docs/browse.svg, the screenshot of `tcx browse` on docs/browse.md, from a real recording.

    tcx report fixtures/programs/models/tiny_llama.py --save llama.tcx.gz -o /dev/null
    python docs/browse_screenshot.py llama.tcx.gz [KEY ...]

The keys (textual key names, default: a search for the RMSNorm kernel) are pressed in a
headless 130x40 terminal, then textual exports the screen as SVG.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tcx.cli.session import load
from tcx.core.selection import whole_run
from tcx.tui.app import BrowseApp

KEYS = ("slash", *"add_mean", "enter")
OUT = Path(__file__).parent / "browse.svg"


async def main(recording: str, keys: tuple[str, ...]) -> None:
    loaded = load(recording)
    app = BrowseApp(loaded.model, whole_run(loaded.model))
    async with app.run_test(size=(130, 40)) as pilot:
        for key in ("wait", *keys):
            if key != "wait":
                await pilot.press(key)
            while app.index is None or "rendering…" in app.detail_text():
                await pilot.pause(0.05)
                await app.workers.wait_for_complete()
            await pilot.pause(0.2)
        OUT.write_text(app.export_screenshot(simplify=True), encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], tuple(sys.argv[2:]) or KEYS))
