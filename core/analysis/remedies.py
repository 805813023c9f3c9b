"""Fix suggestions per graph-break type: PyTorch's hints say what is wrong; these say what to change.

Matched on the break type (torch's gb_type text), most specific first. Each remedy names a
concrete API or code change; torch's own hints are always shown next to it. The recompiles
counterpart (a remedy per failing guard) is core/analysis/recompile_remedies.py.
"""

from __future__ import annotations

from typing import Any

REMEDIES: list[tuple[tuple[str, ...], str]] = [
    (
        ("Data-dependent branching",),
        "The condition depends on tensor values. Make it branchless with torch.where(cond, a, b), or "
        "express both branches with torch.cond(pred, true_fn, false_fn, operands); if the value is "
        "really a constant, compute it outside the compiled function and pass it in.",
    ),
    (
        ("Tensor.item()", "capture_scalar_outputs"),
        "Keep the value as a tensor (e.g. use x.max() in torch.where instead of x.max().item()), or set "
        "torch._dynamo.config.capture_scalar_outputs = True (env TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1) "
        "so .item() is traced as a symbolic value.",
    ),
    (
        ("Data dependent operator",),
        "A tensor's value is converted to a Python number (float(t), int(t), .tolist(), .numpy()). Keep "
        "the computation in torch ops, or set torch._dynamo.config.capture_scalar_outputs = True.",
    ),
    (
        ("builtin operator `print`", "print"),
        "Move the print out of the compiled function, log tensors after it returns, or add print to "
        "torch._dynamo.config.reorderable_logging_functions so Dynamo moves it after the graph.",
    ),
    (
        ("torch._dynamo.graph_break()",),
        "This break is explicit: remove the torch._dynamo.graph_break() call if it is no longer needed.",
    ),
    (
        ("graph break in loop",),
        "Dynamo skipped the whole function because a break happened inside a loop. Fix the inner break, "
        "or move the loop body into its own function so only that function breaks.",
    ),
    (
        ("recompile limit",),
        "The frame recompiled until torch.compile gave up (torch._dynamo.config.recompile_limit). Run "
        "`tcx recompiles` to see the failing guard; usually torch._dynamo.mark_dynamic(x, dim) or "
        "torch.compile(dynamic=True) stops it.",
    ),
    (
        ("copy.deepcopy",),
        "Make the copy outside the compiled region (e.g. in __init__), or wrap the function that copies "
        "with @torch.compiler.disable.",
    ),
    (
        ("numpy",),
        "Use the torch equivalent of the NumPy call, or keep NumPy code outside the compiled function; "
        "Dynamo traces numpy only on tensors' numpy views, not on .numpy() results.",
    ),
    (
        ("`_warnings.warn`",),
        "A warnings.warn inside the compiled code: add it to "
        "torch._dynamo.config.reorderable_logging_functions (.add(warnings.warn)) so Dynamo runs it after "
        "the graph instead of breaking (`tcx fix` tries it), or move the warning out of the compiled "
        "function.",
    ),
    (
        ("marked as skipped", "skip_files", "Attempted to inline function marked as skipped"),
        "The call goes into code Dynamo does not trace. Wrap that library call in a function decorated "
        "with @torch.compiler.disable (one clean break), or call it outside the compiled region.",
    ),
    (
        ("logging.Logger", "logging function"),
        "A logging call inside the compiled code: add that logger method to "
        "torch._dynamo.config.ignore_logging_functions (e.g. .add(logging.Logger.info); the call then does "
        "not run in compiled code, so that message is not logged from there; `tcx fix` tries it), move the "
        "log call after the compiled call, or avoid the option that makes the library log here (for "
        "transformers' output_attentions: attn_implementation='eager').",
    ),
    (
        ("Unsupported context manager",),
        "Dynamo cannot trace this `with` block: move it out of the compiled function, or mark the "
        "function that enters it with @torch.compiler.disable so the rest of the model still compiles.",
    ),
]

LIBRARY_REMEDY = (
    "The break is inside library code you do not own: wrap the call from your code in a function "
    "decorated with @torch.compiler.disable (one clean break instead of a broken trace), or call it "
    "outside the compiled region."
)


def remedy_for(gb_type: str, explanation: str = "", in_library: bool = False) -> str | None:
    haystack = f"{gb_type}\n{explanation}"
    for needles, text in REMEDIES:
        if any(n in haystack for n in needles):
            return text
    return LIBRARY_REMEDY if in_library else None


# Training-step code inside the compiled region (the whole train step compiled): standard remedies, chosen
# by the user's line that led to the break (its code) and torch's own file for the optimizer.
BACKWARD_REMEDY = (
    "backward() inside the compiled function: compile the model (or the forward and the loss) and call "
    "loss.backward() outside it; AOTAutograd compiles the backward from the forward's graph. Compiled "
    "autograd (torch._dynamo.config.compiled_autograd = True) captures backward() itself (untested here)."
)
OPTIMIZER_REMEDY = (
    "optimizer.step() inside the compiled function (torch's optimizer breaks the graph on purpose here): "
    "keep step() outside the compiled function, or compile it on its own, "
    "`opt_step = torch.compile(optimizer.step)` then `opt_step()` after backward() (untested here)."
)
ZERO_GRAD_REMEDY = (
    "optimizer.zero_grad() inside the compiled function: call it outside, before the compiled step or "
    "after optimizer.step()."
)
# A library break that an option of the user's own call turns on: the change is at that call.
OUTPUT_ATTENTIONS_REMEDY = (
    "Your call asks for output_attentions=True, and transformers collects the attention weights through "
    "code Dynamo cannot trace: call the compiled model without it (it defaults to False) and, where you "
    "need the weights, make that call on the model you did not compile (untested here)."
)


def structural_remedy(gb_type: str, stack: list[Any]) -> str | None:
    """The standard remedy when the break is training-step code in the compiled region: backward(),
    optimizer.step() or zero_grad(); or a library break that an option of the user's call turns on
    (output_attentions=True); None otherwise. `stack`: the break's frames (innermost last)."""
    user = [f for f in stack if f.origin == "user"]
    code = (getattr(user[-1], "code", None) or "") if user else ""  # a frame may come without its code
    if "Tensor.backward()" in gb_type or ".backward(" in code:
        return BACKWARD_REMEDY
    if ".zero_grad(" in code:
        return ZERO_GRAD_REMEDY
    if any("/torch/optim/" in f.file.replace("\\", "/") for f in stack):
        return OPTIMIZER_REMEDY
    in_library = bool(stack) and stack[-1].origin != "user"
    if in_library and "output_attentions=True" in code.replace(" ", ""):
        return OUTPUT_ATTENTIONS_REMEDY
    return None
