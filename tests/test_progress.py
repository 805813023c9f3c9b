"""The live status follows a recording as it is written, line by line, partial lines included."""

from __future__ import annotations

import json

from tcx.core.run.progress import RecordingFollower


def _line(event: dict) -> bytes:
    return (json.dumps(event) + "\n").encode()


def test_follower_tracks_frame_stage_and_breaks(tmp_path):
    path = tmp_path / "run.tcx"
    path.write_bytes(_line({"kind": "header", "format": "tcx-recording", "version": 1}))
    follower = RecordingFollower(path)
    assert follower.poll().frame is None
    assert "running the program" in follower.progress.describe()
    start = _line(
        {
            "kind": "trace",
            "md": {
                "dynamo_start": {"stack": [{"name": "<module>"}, {"name": "f"}]},
                "frame_id": 0,
                "frame_compile_id": 1,
                "attempt": 0,
            },
            "payload": None,
        }
    )
    with path.open("ab") as fh:
        fh.write(start[:30])  # a line still being written is not read yet
    assert follower.poll().frame is None
    phase = {
        "kind": "trace",
        "md": {"chromium_event": {}, "frame_id": 0, "frame_compile_id": 1},
        "payload": json.dumps({"name": "inductor_compile", "ph": "B"}),
    }
    with path.open("ab") as fh:
        fh.write(start[30:] + _line(phase) + _line({"kind": "graph_break", "gb_type": "x"}))
    progress = follower.poll()
    assert (progress.frame, progress.compile_id, progress.stage) == ("f", "0/1", "Inductor")
    assert progress.compiles == 1 and progress.graph_breaks == 1
    assert "compiling f (0/1) · Inductor" in progress.describe()
