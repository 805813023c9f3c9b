"""A GPU's peak figures, and where a kernel stands against them (its roofline).

Pure and torch-free. Peaks come from the vendor's datasheet for the GPUs in `DATASHEET` (the source
is named with every figure); for another GPU the memory bandwidth is derived from the memory clock
and bus width torch reports (cudaDeviceProp: 2 transfers per clock), and its FLOP peak is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FAR_BELOW = 0.5  # a kernel under this share of its roof is a finding


@dataclass(frozen=True)
class Peaks:
    device: str
    memory_bytes_s: float | None
    flops_s: dict[str, float]  # dtype (or "tf32") -> dense FLOP/s
    source: str


def _datasheet(memory_tb_s: float, bf16: float, tf32: float, fp32: float, source: str) -> dict[str, Any]:
    tflops = {"bfloat16": bf16, "float16": bf16, "tf32": tf32, "float32": fp32}
    return {"memory": memory_tb_s * 1e12, "flops": {k: v * 1e12 for k, v in tflops.items()}, "source": source}


# Matched on the device name torch reports, most specific first. Dense (not sparse) tensor-core figures.
DATASHEET: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "H200 NVL",
        _datasheet(
            4.8, 835.0, 417.5, 60.0, "NVIDIA H200 NVL datasheet: HBM3e 4.8 TB/s, dense BF16 835 TFLOPS"
        ),
    ),
    (
        "H200",
        _datasheet(
            4.8,
            989.4,
            494.7,
            66.9,
            "NVIDIA H200 SXM datasheet: HBM3e 4.8 TB/s, dense BF16/FP16 989 TFLOPS, TF32 495, FP32 67",
        ),
    ),
    (
        "H100 PCIe",
        _datasheet(
            2.0, 756.5, 378.0, 51.2, "NVIDIA H100 PCIe datasheet: HBM2e 2.0 TB/s, dense BF16 756 TFLOPS"
        ),
    ),
    (
        "H100",
        _datasheet(
            3.35, 989.4, 494.7, 66.9, "NVIDIA H100 SXM datasheet: HBM3 3.35 TB/s, dense BF16/FP16 989 TFLOPS"
        ),
    ),
    (
        "A100-SXM4-80GB",
        _datasheet(
            2.039, 312.0, 156.0, 19.5, "NVIDIA A100 80GB SXM datasheet: HBM2e 2.0 TB/s, BF16 312 TFLOPS"
        ),
    ),
    (
        "A100",
        _datasheet(1.555, 312.0, 156.0, 19.5, "NVIDIA A100 40GB datasheet: HBM2 1.6 TB/s, BF16 312 TFLOPS"),
    ),
)


def peaks_for(device: dict[str, Any] | None) -> Peaks | None:
    """The peaks of the GPU a run used (`cost_device`), or None when it used none."""
    if not device or not isinstance(device.get("name"), str):
        return None
    name = device["name"]
    for pattern, sheet in DATASHEET:
        if pattern in name:
            return Peaks(name, sheet["memory"], dict(sheet["flops"]), sheet["source"])
    clock, bus = device.get("memory_clock_rate"), device.get("memory_bus_width")
    if type(clock) is int and type(bus) is int and 0 < clock < 10**9 and 0 < bus < 10**6:
        memory = 2 * clock * 1e3 * bus / 8  # kHz, bits; double data rate
        return Peaks(name, memory, {}, "memory clock × bus width × 2 (cudaDeviceProp); FLOP peak not known")
    return Peaks(name, None, {}, "not known for this device")


def roofline(
    seconds: float, nbytes: float | None, flops: float | None, dtype: str | None, peaks: Peaks, tf32: bool
) -> dict[str, Any]:
    """Achieved rates of one kernel (per call: its time, bytes and FLOPs) against the device's peaks."""
    out: dict[str, Any] = {
        "bytes": nbytes,
        "flops": flops,
        "bandwidth_bytes_s": nbytes / seconds if nbytes and seconds > 0 else None,
        "flops_s": flops / seconds if flops and seconds > 0 else None,
        "peak_source": peaks.source,
    }
    key = "tf32" if dtype == "float32" and tf32 else dtype
    peak_flops = peaks.flops_s.get(key or "")
    out["memory_share"] = (
        out["bandwidth_bytes_s"] / peaks.memory_bytes_s
        if out["bandwidth_bytes_s"] and peaks.memory_bytes_s
        else None
    )
    out["compute_share"] = out["flops_s"] / peak_flops if out["flops_s"] and peak_flops else None
    if flops and nbytes and peak_flops and peaks.memory_bytes_s:
        intensity, ridge = flops / nbytes, peak_flops / peaks.memory_bytes_s
        out["bound"] = "compute" if intensity >= ridge else "memory"
        out["intensity"] = intensity
    elif flops and peak_flops and not nbytes:
        out["bound"] = "compute"
    elif nbytes:
        out["bound"] = "memory"  # no FLOP count: pointwise and reduction kernels move data
    else:
        out["bound"] = None
    share = out["compute_share"] if out["bound"] == "compute" else out["memory_share"]
    out["share_of_peak"] = share
    out["far_below_roof"] = share is not None and share < FAR_BELOW
    return out
