"""`--call` specs and TARGET resolution. Torch-free: both run before tcx knows whether it needs torch."""

from __future__ import annotations

import gzip
import json

import pytest

from tcx.core.errors import EXIT_USAGE, UsageError
from tcx.core.ingest.recording import save_copy, write_header
from tcx.core.run.callspec import LiteralArg, TensorArg, parse_call_spec, spec_to_json
from tcx.core.run.targets import FileTarget, ProgramTarget, resolve_target

# --- parse_call_spec ------------------------------------------------------------------------------


def test_plain_shapes_are_float32_tensors():
    assert parse_call_spec("128x32,32x64,64") == [
        TensorArg((128, 32)),
        TensorArg((32, 64)),
        TensorArg((64,)),
    ]
    assert TensorArg((128, 32)).dtype == "float32" and not TensorArg((1,)).requires_grad


def test_dtypes_grad_and_literals():
    assert parse_call_spec("128x32:f16:grad,=3") == [
        TensorArg((128, 32), "float16", True),
        LiteralArg(3),
    ]
    assert parse_call_spec("4x8:i64,=None,=0.5,scalar") == [
        TensorArg((4, 8), "int64"),
        LiteralArg(None),
        LiteralArg(0.5),
        TensorArg(()),
    ]


@pytest.mark.parametrize(
    ("alias", "dtype"),
    [("f32", "float32"), ("float", "float32"), ("half", "float16"), ("BF16", "bfloat16"),
     ("double", "float64"), ("long", "int64"), ("i32", "int32"), ("int", "int32"), ("i8", "int8"),
     ("u8", "uint8"), ("bool", "bool")],
)  # fmt: skip
def test_dtype_aliases(alias, dtype):
    (arg,) = parse_call_spec(f"2x3:{alias}")
    assert arg == TensorArg((2, 3), dtype)


@pytest.mark.parametrize("grad", ["grad", "g", "requires_grad"])
def test_grad_spellings_and_modifier_order(grad):
    assert parse_call_spec(f"5:{grad}:bf16") == [TensorArg((5,), "bfloat16", True)]


def test_spacing_case_and_special_shapes():
    assert parse_call_spec(" 2X3 , =True ,() , 0x4 ") == [
        TensorArg((2, 3)),
        LiteralArg(True),
        TensorArg(()),
        TensorArg((0, 4)),
    ]
    assert parse_call_spec("") == [] and parse_call_spec("   ") == []


def test_literals_of_every_python_kind():
    spec = "=[1, 2],=(3, 'a'),={'k': 1.5},='text',=-7,=1e-3,=(4,),='a,b',=\"x',y\",2x2"
    values = [a.value if isinstance(a, LiteralArg) else a for a in parse_call_spec(spec)]
    assert values == [[1, 2], (3, "a"), {"k": 1.5}, "text", -7, 1e-3, (4,), "a,b", "x',y", TensorArg((2, 2))]


def test_unbalanced_literal_is_named_whole():
    with pytest.raises(UsageError, match=r"'=\[1, 2,3x3' is not a Python literal"):
        parse_call_spec("=[1, 2,3x3")


def test_literals_are_never_evaluated_as_code(tmp_path):
    marker = tmp_path / "pwned"
    bad = f"=__import__('pathlib').Path({str(marker)!r}).touch()"
    with pytest.raises(UsageError, match="is not a Python literal"):
        parse_call_spec(bad)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("spec", "named", "why"),
    [
        ("2x3,,4", None, "empty item"),
        ("2x3,", None, "empty item"),
        ("2xa", "'2xa'", "is not a shape like 128x32"),
        ("x", "'x'", "is not a shape like 128x32"),
        ("2.5x3", "'2.5x3'", "is not a shape like 128x32"),
        ("tensor", "'tensor'", "is not a shape like 128x32"),
        ("=foo(", "'=foo('", "is not a Python literal"),
        ("=x", "'=x'", "is not a Python literal"),
        ("2x3:f17", "'f17'", "unknown modifier"),
        ("2x3:cuda", "'cuda'", "unknown modifier"),
        ("2x3:i64:grad", "'2x3:i64:grad'", "only floating tensors can require grad"),
        ("4:bool:g", "'4:bool:g'", "only floating tensors can require grad"),
        ("-1x3", "'-1x3'", "negative dimension"),
    ],
)
def test_bad_items_are_usage_errors_naming_the_item(spec, named, why):
    with pytest.raises(UsageError) as info:
        parse_call_spec(f"8x8,{spec}")
    err = info.value
    assert err.exit_code == EXIT_USAGE
    assert why in err.message
    assert err.message.startswith(f"--call {f'8x8,{spec}'!r}")
    if named:
        assert named in err.message


def test_describe_and_json_form():
    args = parse_call_spec("128x32:f16:grad,=3,scalar,=None")
    assert [a.describe() for a in args] == ["128x32:float16:grad", "=3", "scalar:float32", "=None"]
    assert spec_to_json(args) == [
        {"tensor": [128, 32], "dtype": "float16", "grad": True},
        {"literal": "3"},
        {"tensor": [], "dtype": "float32", "grad": False},
        {"literal": "None"},
    ]
    json.dumps(spec_to_json(args))
    # describe() is itself a valid spec that parses back to the same arguments
    assert parse_call_spec(",".join(a.describe() for a in args)) == args


# --- resolve_target -------------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text("def f(x):\n    return x\n")
    return tmp_path


def test_script(workdir):
    target = resolve_target("model.py")
    assert target == ProgramTarget(script=str(workdir / "model.py"), module=None, function=None)
    assert target.label == str(workdir / "model.py")


def test_script_function(workdir):
    target = resolve_target("model.py:f")
    assert target == ProgramTarget(script=str(workdir / "model.py"), module=None, function="f")
    assert target.label.endswith("model.py:f")
    assert resolve_target(str(workdir / "model.py") + ":Net.forward").function == "Net.forward"


def test_module_function_and_module(workdir):
    assert resolve_target("pkg.sub.mod:run") == ProgramTarget(
        script=None, module="pkg.sub.mod", function="run"
    )
    assert resolve_target("mod:run") == ProgramTarget(script=None, module="mod", function="run")
    assert resolve_target("pkg.mod") == ProgramTarget(script=None, module="pkg.mod", function=None)
    assert resolve_target("pkg.mod:run").label == "pkg.mod:run"


@pytest.mark.parametrize(
    "text", ["missing.py", "missing.py:f", "sub/missing.py", "missing.tcx", "missing.tcx.gz"]
)
def test_missing_files_are_usage_errors(workdir, text):
    with pytest.raises(UsageError, match="no such file") as info:
        resolve_target(text)
    assert info.value.exit_code == EXIT_USAGE
    assert repr(text.split(":")[0]) in info.value.message


@pytest.mark.parametrize("text", ["", "data/x.txt:f", "1bad:f", "some thing:f"])
def test_unusable_targets_are_usage_errors(workdir, text):
    with pytest.raises(UsageError):
        resolve_target(text)


def test_recording_files(workdir):
    rec = workdir / "run.tcx"
    write_header(rec)
    assert resolve_target("run.tcx") == FileTarget(path=str(rec), kind="recording")
    # recognised by its header whatever it is called ...
    (workdir / "run.jsonl").write_bytes(rec.read_bytes())
    assert resolve_target("run.jsonl").kind == "recording"
    # ... and inside gzip
    save_copy(rec, workdir / "run.gz")
    assert resolve_target("run.gz") == FileTarget(path=str(workdir / "run.gz"), kind="recording")
    save_copy(rec, workdir / "kept.tcx.gz")
    assert resolve_target("kept.tcx.gz").kind == "recording"


def test_trace_logs_and_directories(workdir):
    log = workdir / "dedicated_log_torch_trace_abc.log"
    log.write_text('V1206 15:18:15.925000 1500233 torch/_dynamo/utils.py:1288] {"str": ["a.py", 0]}\n')
    assert resolve_target(str(log)) == FileTarget(path=str(log), kind="trace")
    gz = workdir / "trace.log.gz"
    gz.write_bytes(gzip.compress(log.read_bytes()))
    assert resolve_target("trace.log.gz") == FileTarget(path=str(gz), kind="trace")  # not a recording
    (workdir / "traces").mkdir()
    assert resolve_target("traces") == FileTarget(path=str(workdir / "traces"), kind="trace")
    assert resolve_target(".") == FileTarget(path=str(workdir), kind="trace")


def test_existing_file_with_a_colon_in_its_name_is_a_file(workdir):
    odd = workdir / "run:final"
    odd.write_text("not a python name\n")
    assert resolve_target("run:final") == FileTarget(path=str(odd), kind="trace")


def test_unreadable_gzip_is_not_taken_for_a_recording(workdir):
    (workdir / "broken.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 10)
    assert resolve_target("broken.gz").kind == "trace"  # loading it then reports what is wrong
