"""Runs one defect injected on purpose into a sanitized build (Note [Injected sanitizer reports],
csrc/testing/sanitizer_selftest.cpp): ``python sanitizer_injected.py KIND``, KIND one of
``use_after_free`` (needs address), ``signed_overflow`` (undefined), ``data_race`` (thread).

In a build with that sanitizer the process stops at the report and never reports a result; in a
build without it the extension refuses (an unsanitized build has no such function), and the
scenario reports ``{"skipped": why}``. A result ``{"ran": KIND}`` means the defect ran and no
sanitizer said a thing.
"""

import sys

from _lib.scenario import report

import torch_npu_pinpool._C as ext

kind = sys.argv[1]
try:
    if not ext.sanitizers:
        raise RuntimeError(
            "not a sanitized build: inject_sanitizer_report is built only with "
            "TORCH_NPU_PINPOOL_SANITIZE=address,undefined or =thread"
        )
    value = ext.inject_sanitizer_report(kind)
except RuntimeError as e:  # not built with the sanitizer this defect needs
    report({"skipped": str(e)})
else:
    report({"ran": kind, "value": value})
