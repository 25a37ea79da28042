"""The process variants a figure can compare: each runs in its own worker processes, with its
environment, because an allocator cannot be unregistered once active.

To add a variant (say, the plugin with its audit report on), add one entry here and name it
in the VARIANTS of the figures that compare it; the driver starts its processes, rotated with
the others in every trial.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    what: str  # one line for the table's legend
    plugin: bool  # the worker imports torch_npu_pinpool and checks it is active
    env: dict = field(default_factory=dict)  # set in the worker's environment


AUDIT_SAMPLE = 64  # the sampled variant compares one copy / replay in this many (P13)

VARIANTS = {
    "native": Variant("torch_npu's own pinned host allocator (TORCH_NPU_PINPOOL=0)", False,
                      {"TORCH_NPU_PINPOOL": "0"}),
    "plugin": Variant("torch_npu_pinpool, defaults", True,
                      {"TORCH_NPU_PINPOOL": "1", "TORCH_NPU_PINPOOL_COPY_GUARD": "1"}),
    "noguard": Variant("torch_npu_pinpool without the pageable-copy guard "
                       "(TORCH_NPU_PINPOOL_COPY_GUARD=0)", True,
                       {"TORCH_NPU_PINPOOL": "1", "TORCH_NPU_PINPOOL_COPY_GUARD": "0"}),
    "report": Variant("torch_npu_pinpool with the audit report on (TORCH_NPU_PINPOOL_REPORT=1)",
                      True, {"TORCH_NPU_PINPOOL": "1", "TORCH_NPU_PINPOOL_COPY_GUARD": "1",
                             "TORCH_NPU_PINPOOL_REPORT": "1"}),
    "sampled": Variant("torch_npu_pinpool with the audit report sampled "
                       f"(TORCH_NPU_PINPOOL_REPORT_SAMPLE={AUDIT_SAMPLE})", True,
                       {"TORCH_NPU_PINPOOL": "1", "TORCH_NPU_PINPOOL_COPY_GUARD": "1",
                        "TORCH_NPU_PINPOOL_REPORT": "1",
                        "TORCH_NPU_PINPOOL_REPORT_SAMPLE": str(AUDIT_SAMPLE)}),
}
BASELINE = "native"
