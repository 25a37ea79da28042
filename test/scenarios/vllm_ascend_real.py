"""vllm-ascend's own classes (issue #36), not imitations of them: its ``ACLGraphWrapper``
(vllm_ascend/compilation/acl_graph.py) captures and replays a FULL graph per batch descriptor in
the platform's global graph pool, and its ``BlockTable`` (vllm_ascend/worker/block_table.py)
stages the block table through pinned host memory: ``commit_block_table`` clones the CPU rows
into a *temporary* pinned tensor and copies it to the device non-blocking, the temporary freed
at once; ``CpuGpuBuffer`` (vLLM's, which vllm-ascend's buffers are) keeps a persistent pinned
mirror it copies with ``copy_to_gpu``.

Two uses, each over several batch sizes, with eager pinned churn (pin, fill, free) between the
replays:
  * ``prepared``: as vllm-ascend's model runner does it, the staging runs before the wrapper
    call, every step (the graph reads the device buffers): every replay must see that step's
    inputs.
  * ``staged_in_capture``: the staging call runs inside the captured runnable, so the graph holds
    an H2D copy from the persistent pinned buffer (re-read at every replay: must see the current
    input ids) and one from ``commit_block_table``'s temporary, freed right after the capture
    (must keep reading the block table as captured, whatever the churn pins there since).

Needs vllm and vllm-ascend importable (test/consumers/test_vllm_ascend.py skips otherwise). A
single-process gloo group stands in for vLLM's distributed init (BlockTable reads the
context-parallel group sizes). Env: STEPS (4 replays per size).
"""

import socket

import torch
import torch_npu  # noqa: F401
from _lib.scenario import PLUGIN, env_int, hazards, npu_version, report, report_checks

STEPS = env_int("STEPS", 4)
SIZES = [2, 4, 8]  # requests per batch (the batch descriptor's num_tokens here)
BLOCKS = 8  # blocks per request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def churn(k: int) -> None:
    """Eager pinned traffic between replays: pins (of the staging sizes) filled with junk."""
    junk = [torch.full((n, BLOCKS), -7 - k, dtype=torch.int32).pin_memory() for n in SIZES]
    for t in junk:
        t.to("npu", non_blocking=True)
    torch.npu.synchronize()
    del junk


def main() -> dict:
    import vllm
    import vllm_ascend
    from vllm.compilation.monitor import set_cudagraph_capturing_enabled
    from vllm.config import CUDAGraphMode, VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.forward_context import BatchDescriptor, set_forward_context
    from vllm.v1.utils import CpuGpuBuffer
    from vllm_ascend.compilation.acl_graph import ACLGraphWrapper
    from vllm_ascend.worker.block_table import BlockTable

    out: dict = {
        "vllm": vllm.__version__,
        "vllm_ascend": getattr(vllm_ascend, "__version__", None)
        or __import__("importlib.metadata").metadata.version("vllm-ascend"),
        "npu_version": list(npu_version()),
        "plugin": PLUGIN,
    }
    cfg = VllmConfig()
    device = torch.device("npu:0")
    with set_current_vllm_config(cfg):
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, backend="gloo",
            distributed_init_method=f"tcp://127.0.0.1:{free_port()}",
        )
        initialize_model_parallel(1, 1)
        set_cudagraph_capturing_enabled(True)
        max_reqs = max(SIZES)
        for mode in ("prepared", "staged_in_capture"):
            table = BlockTable(
                block_size=16, max_num_reqs=max_reqs, max_num_blocks_per_req=BLOCKS,
                max_num_batched_tokens=64, pin_memory=True, device=device,
            )
            ids = CpuGpuBuffer(max_reqs, dtype=torch.int32, device=device, pin_memory=True)
            staged = mode == "staged_in_capture"

            def model(n: int, ids=ids, table=table, staged=staged) -> torch.Tensor:
                if staged:
                    ids.copy_to_gpu(n)
                    table.commit_block_table(n)
                # per request: its id * 1000 + the sum of its block table row
                return ids.gpu[:n] * 1000 + table.get_device_tensor(n).sum(dim=1, dtype=torch.int32)

            wrapper = ACLGraphWrapper(model, cfg, CUDAGraphMode.FULL)
            pinned_ok = bool(table.block_table.cpu.is_pinned() and ids.cpu.is_pinned())
            wrong: list[str] = []
            replays = 0
            captured_rows: dict[int, torch.Tensor] = {}
            for step in range(STEPS + 1):  # step 0 captures, then STEPS replays per size
                for n in SIZES:
                    for r in range(max_reqs):  # (BlockTable.clear() calls CpuGpuBuffer.fill_,
                        table.clear_row(r)     # which vLLM 0.23.0's buffer does not have)
                    for r in range(n):
                        table.add_row([step + r + 1] * (r % BLOCKS + 1), r)
                    ids.np[:n] = [100 * step + r for r in range(n)]
                    if not staged:  # the model runner's _prepare_inputs
                        ids.copy_to_gpu(n)
                        table.commit_block_table(n)
                    rows = table.get_cpu_tensor()[:n].sum(dim=1, dtype=torch.int32).clone()
                    if staged and step == 0:
                        captured_rows[n] = rows
                    if staged:
                        rows = captured_rows[n]  # the temporary's bytes as captured
                    want = torch.tensor(ids.np[:n].copy()) * 1000 + rows
                    bd = BatchDescriptor(num_tokens=n)
                    with set_forward_context(
                        None, cfg, cudagraph_runtime_mode=CUDAGraphMode.FULL, batch_descriptor=bd
                    ):
                        got = wrapper(n)
                    if step == 0:
                        # the capture does not run the graph: replay once for the first result
                        with set_forward_context(
                            None, cfg, cudagraph_runtime_mode=CUDAGraphMode.FULL,
                            batch_descriptor=bd,
                        ):
                            got = wrapper(n)
                    torch.npu.synchronize()
                    replays += 1
                    if not torch.equal(got.cpu(), want):
                        got_list = got.cpu().tolist()
                        wrong.append(f"size {n} step {step}: {got_list} != {want.tolist()}")
                churn(step)
            out[mode] = {
                "pinned": pinned_ok,
                "graphs": len(wrapper.concrete_aclgraph_entries),
                "replays": replays,
                "wrong": wrong[:6],
            }
    found = hazards()
    out["hazards"] = {k: h["count"] for k, h in found.items() if h["count"]}
    out["hazard_sites"] = {
        k: sorted({s.rsplit("/", 2)[-2] + "/" + s.rsplit("/", 1)[-1] for s in h.get("sites", [])})
        for k, h in found.items()
        if h["count"]
    }
    out["checks"] = report_checks()
    from _lib import simctl

    if simctl.available():
        out["violations"] = simctl.violations()
    return out


report(main())
