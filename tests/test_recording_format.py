"""The recording file: header, versioning, damaged files, gzip copies. Torch-free."""

from __future__ import annotations

import gzip
import json

import pytest

from tcx import __version__
from tcx.core.errors import EXIT_INPUT, InputError
from tcx.core.ingest.recording import (
    FORMAT_NAME,
    FORMAT_VERSION,
    RecordingWriter,
    load_recording,
    save_copy,
    write_header,
)

EVENTS = [
    {"kind": "run_start", "torch_version": "2.13.0", "backend": "eager"},
    {"kind": "trace", "md": {"str": ["/src/model.py", 0]}, "payload": None},
    {
        "kind": "trace",
        "md": {"dynamo_output_graph": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0},
        "payload": "class GraphModule(torch.nn.Module):\n    def forward(self, x):\n        return (x,)\n",
    },
    {"kind": "log", "level": "WARNING", "message": "ünïcödé ✓ \x1b[31m and a tab\t"},
    {"kind": "program_exit", "status": "ok", "exit_code": 0},
]


def write_recording(path, events=EVENTS, **header):
    write_header(path, target="/src/model.py", **header)
    writer = RecordingWriter(path)
    for event in events:
        writer.write(**event)
    writer.close()
    return path


def test_round_trip(tmp_path):
    path = write_recording(tmp_path / "run.tcx")
    rec = load_recording(path)
    assert rec.header["format"] == FORMAT_NAME and rec.header["version"] == FORMAT_VERSION
    assert rec.header["tcx_version"] == __version__
    assert rec.header["target"] == "/src/model.py"
    assert rec.events == EVENTS
    assert rec.problems == []
    assert rec.source == str(path)
    assert rec.first("program_exit") == {"kind": "program_exit", "status": "ok", "exit_code": 0}
    assert len(list(rec.of_kind("trace"))) == 2
    assert rec.first("outcome") is None


def test_writer_appends_one_line_per_event_and_flushes(tmp_path):
    path = tmp_path / "run.tcx"
    write_header(path)
    writer = RecordingWriter(path)
    writer.write("log", message="first")
    # flushed per event: readable while the writer is still open (a crash keeps it)
    assert load_recording(path).events == [{"kind": "log", "message": "first"}]
    writer.write("log", message="second\nline", value=object())  # not JSON-able: written as repr
    writer.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    second = load_recording(path).events[1]
    assert second["message"] == "second\nline" and second["value"].startswith("<object object")


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such recording") as info:
        load_recording(tmp_path / "gone.tcx")
    assert info.value.exit_code == EXIT_INPUT
    with pytest.raises(InputError, match="no such recording"):
        load_recording(tmp_path)  # a directory is not a recording


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello, this is a text file\nwith two lines\n",
        b'{"kind": "header", "format": "other-tool", "version": 1}\n',
        b'{"format": "tcx-recording"\n',  # cut-off header
        b"[1, 2, 3]\n",
        b'"tcx-recording"\n',
        b"V1206 15:18:15.925000 1500233 torch/_dynamo/utils.py:1288] {}\n",
        bytes(range(256)) * 16,
    ],
    ids=["empty", "text", "other-json", "cut-header", "json-list", "json-string", "trace-log", "binary"],
)
def test_foreign_files_are_input_errors(tmp_path, content):
    path = tmp_path / "thing.tcx"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        load_recording(path)
    assert info.value.exit_code == EXIT_INPUT
    assert str(path) in info.value.message
    assert "does not look like a tcx recording" in info.value.message
    assert info.value.hint and "--save" in info.value.hint


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 99])
def test_newer_version_is_refused(tmp_path, version):
    path = tmp_path / "future.tcx"
    header = {"kind": "header", "format": FORMAT_NAME, "version": version, "tcx_version": "9.0"}
    path.write_text(json.dumps(header) + "\n" + json.dumps({"kind": "log"}) + "\n")
    with pytest.raises(InputError, match="newer tcx") as info:
        load_recording(path)
    assert repr(version) in info.value.message
    assert f"reads up to {FORMAT_VERSION}" in info.value.message


@pytest.mark.parametrize("version", ["1", None, 0, -1, 1.5])
def test_a_version_that_is_no_format_number_is_unreadable(tmp_path, version):
    """Not "newer tcx": a string, null, zero or a negative number is no version any tcx wrote."""
    path = tmp_path / "odd.tcx"
    path.write_text(json.dumps({"kind": "header", "format": FORMAT_NAME, "version": version}) + "\n")
    with pytest.raises(InputError, match="unreadable recording") as info:
        load_recording(path)
    assert "newer tcx" not in info.value.message


def test_truncated_last_line_is_a_problem_and_earlier_events_are_kept(tmp_path):
    path = write_recording(tmp_path / "cut.tcx")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 15])  # the program_exit line loses its end (and newline)
    rec = load_recording(path)
    assert rec.events == EVENTS[:-1]
    assert rec.problems == [
        f"cut.tcx:{len(EVENTS) + 1}: not a JSON event (truncated last line: the run was cut off)"
    ]


def test_bad_lines_in_the_middle_are_skipped_and_named(tmp_path):
    path = write_recording(tmp_path / "mixed.tcx")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(2, "{not json}\n")
    lines.insert(3, '["a", "list"]\n')
    lines.insert(4, '{"no_kind": 1}\n')
    lines.insert(5, "\n")
    path.write_text("".join(lines), encoding="utf-8")
    rec = load_recording(path)
    assert rec.events == EVENTS
    assert rec.problems == [
        "mixed.tcx:3: not a JSON event",
        "mixed.tcx:4: not a tcx event",
        "mixed.tcx:5: not a tcx event",
    ]


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    path = write_recording(tmp_path / "bytes.tcx")
    with path.open("ab") as fh:
        fh.write(b'{"kind": "log", "message": "\xff\xfe bad bytes"}\n')
    rec = load_recording(path)
    assert rec.events[-1]["message"] == "\ufffd\ufffd bad bytes"


@pytest.mark.parametrize("dest_name", ["copy.tcx.gz", "copy.gz"])
def test_gzip_round_trip_via_save_copy(tmp_path, dest_name):
    src = write_recording(tmp_path / "run.tcx")
    dest = tmp_path / "kept" / dest_name  # the parent is created
    save_copy(src, dest)
    assert dest.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(dest.read_bytes()) == src.read_bytes()
    original, copy = load_recording(src), load_recording(dest)
    assert copy.header == original.header
    assert copy.events == original.events == EVENTS
    assert copy.problems == []


def test_plain_save_copy_is_byte_identical(tmp_path):
    src = write_recording(tmp_path / "run.tcx")
    save_copy(src, tmp_path / "same.tcx")
    assert (tmp_path / "same.tcx").read_bytes() == src.read_bytes()


def test_truncated_gzip_is_an_input_error_naming_the_file(tmp_path):
    src = write_recording(tmp_path / "run.tcx", events=EVENTS * 200)
    data = gzip.compress(src.read_bytes())
    cut = tmp_path / "cut.tcx.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as info:
        load_recording(cut)
    assert str(cut) in info.value.message and "cannot read" in info.value.message


def test_gzip_magic_with_garbage_is_an_input_error(tmp_path):
    path = tmp_path / "fake.tcx.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(range(100)))
    with pytest.raises(InputError, match="cannot read"):
        load_recording(path)


def test_loading_never_executes_code(tmp_path):
    marker = tmp_path / "pwned"
    path = write_recording(
        tmp_path / "evil.tcx",
        events=[{"kind": "log", "message": f"__import__('pathlib').Path({str(marker)!r}).touch()"}],
    )
    rec = load_recording(path)
    assert rec.events[0]["message"].startswith("__import__")
    assert not marker.exists()
