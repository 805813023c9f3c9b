"""What a view keeps of a large log (issue 37): facts, not payload text (the HTML report of a 1 GB
log peaked at 959 MB when every cache lookup held its own parsed key and the codegen view held every
module's code). Torch-free: real TORCH_TRACE logs from fixtures/. No timing or RSS here: `make
bench` measures those; these assert what is held, which a regression would change.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tcx.core.ingest.trace_events import event_name, unpack
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.torchtext.cache_key import parse_components
from tcx.core.views.codegen import build_codegen

INPUTS = Path(__file__).resolve().parent.parent / "fixtures" / "torch-trace" / "tlparse-tests" / "inputs"
CACHE_LOG = INPUTS / "cache_hit_miss.log"  # a real run: FX graph cache misses, then hits of the same keys
SIMPLE = INPUTS / "simple.log"  # a real Inductor run: one output-code module, two Triton kernels


def _logged_keys(log: Path) -> list[list[object]]:
    """Each FX graph / AOTAutograd cache artifact's key parts as torch wrote them (the eager reader)."""
    keys = []
    for ev in load_trace(log, lazy=False).events:
        name = event_name(ev["md"])
        if name.startswith("artifact:") and "_cache_" in name and "pickle" not in name:
            keys.append(json.loads(unpack(ev["payload"]) or "{}").get("components") or [])
    return keys


def test_cache_key_parts_are_parsed_once_and_shared_between_lookups() -> None:
    lookups = build_model(load_trace(CACHE_LOG), "trace").cache_lookups
    logged = _logged_keys(CACHE_LOG)
    assert len(lookups) == len(logged) >= 4
    # the same facts as parsing each lookup's key on its own
    assert [lk.components for lk in lookups] == [parse_components(parts) for parts in logged]
    parts = [part for lk in lookups for part in lk.components.values()]
    distinct = {(p.name, p.digest) for p in parts}
    assert len(parts) > 2 * len(distinct)  # the keys repeat their parts (configs, versions)
    assert len({id(p) for p in parts}) == len(distinct)  # one object per distinct part


def test_codegen_view_reads_module_code_from_the_log_when_asked() -> None:
    model = build_model(load_trace(SIMPLE), "trace")
    view = build_codegen(model)
    assert view.outputs and view.kernel_count == 2
    events = load_trace(SIMPLE, lazy=False).events
    logged = [unpack(ev["payload"]) for ev in events if event_name(ev["md"]) == "inductor_output_code"]
    assert [o.source for o in view.outputs] == logged
    for output in view.outputs:
        held = [getattr(output, f.name) for f in dataclasses.fields(output)]
        assert max(len(v) for v in held if isinstance(v, str)) < 200, "a view holds a module's code"
