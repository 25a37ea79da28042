"""Issue 47's differential fuzzer: random programs run with the plugin and natively
(``TORCH_NPU_PINPOOL=0``), each in a fresh process, compared step by step (README.md here).

program.py generates programs, runner.py executes one run, execute.py runs the process pairs,
compare.py holds the rules, shrink.py the delta debugging and reproducers, cli.py the command
line, test_fuzz.py the pytest entry.
"""
