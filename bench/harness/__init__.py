"""The benchmark harness, written once for every figure (bench/figures/): worker processes per
variant alternated over trials (driver, worker, variants), spread and verdicts (stats), and what
a run writes (report, plot). bench/README.md says how to add a variant or a figure."""
