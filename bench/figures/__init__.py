"""The figures, in the order they run in a worker and appear in the table.

Each module here is one figure and declares:
  NAME, TITLE, TARGET    "P5", one line, the target in words
  VARIANTS               the process variants it runs in (harness/variants.py), baseline first
  SETTINGS, QUICK        its settings (reps / rep_seconds are shared defaults) and --quick's
  measure(ctx) -> dict   in the worker: {"samples": {key: [..]}, "values": {key: x}, ...}
  summarize(runs)        in the driver: table rows (harness/stats.py row builders)
optional:
  prepare(settings)      in the driver, once before the trials (P7 builds its C++ loop)
  plot(ax, rows, runs)   its panel in the plot (default: plugin/native ratios with spread)
"""

from __future__ import annotations

from . import (
    p1_eager,
    p2_capture,
    p3_cycles,
    p4_footprint,
    p5_decode,
    p6_large,
    p7_fastpath,
    p8_copy_guard,
    p9_many_graphs,
    p10_report,
    p11_pins,
    p12_peak_bytes,
    p13_sampled_audit,
)

_ORDER = (p1_eager, p2_capture, p3_cycles, p4_footprint, p5_decode, p6_large, p7_fastpath,
          p8_copy_guard, p9_many_graphs, p10_report, p11_pins, p12_peak_bytes, p13_sampled_audit)
FIGURES = {m.NAME: m for m in _ORDER}

# Shared defaults of every figure's settings (a figure's SETTINGS may override them).
COMMON = {"reps": 9, "rep_seconds": 0.02}
COMMON_QUICK = {"reps": 3, "rep_seconds": 0.01}
