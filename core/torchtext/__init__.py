"""Torch's text formats, parsed once: pure, torch-free functions, one module per format.

- `guards`       guard failure messages (recompile reasons, `check_verbose`), `check_tensor`
                 lines, the guard tree torch prints (`dynamo_cpp_guards_str`), guard sources
- `locations`    the user-code location comments torch appends to guards and FX graph nodes
- `fx_graph`     printed FX graphs (`dynamo_output_graph`, AOTAutograd and post-grad graphs)
- `output_code`  Inductor's output code: kernels, the wrapper's `call()`, launches, buffers
- `names`        names torch gives to code it generates (resume functions, kernels)
- `cache_key`    the parts of a compile-cache key torch logs (`[digest] name: value`)
- `dtypes`       element sizes of dtypes, however torch spells them
- `arch`         CUDA architecture names (`sm_90`)
- `graph_break_text` the `dynamo_graph_break_reason` artifact, in fields

Every parser here is tested on text saved from real torch runs (tests/data/torchtext/).

May import (tests/test_structure.py holds it): nothing of tcx's; every other stage imports it.
"""
