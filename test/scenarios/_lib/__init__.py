"""Helpers of the scenario files in ``test/scenarios/`` (not scenarios themselves): ``scenario``
(runtime-neutral helpers), ``result`` (``report()``, torch-free), ``simctl`` (the simulator's
control API), ``capture_checks`` (shared by the failure-path scenarios) and
``autoload_worker`` (the worker ``autoload_workers.py`` starts). A scenario runs by path, so
``test/scenarios`` is first on its ``sys.path`` and it imports these as
``from _lib.scenario import ...``. Imports nothing itself: a child spawned to unpickle
``autoload_worker.work`` must import only what ``work`` does."""
