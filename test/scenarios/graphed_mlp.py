"""make_graphed_callables on a 2-layer MLP (Linear, ReLU, Linear) trained a few steps with mse
loss and SGD, against the same model trained eagerly.

The forward stages a constant through a pinned temporary (pin, H2D, free: inside the capture);
the backward taps the gradient into a pinned D2H buffer (one kept by the caller, one temporary
freed inside the capture). Between steps the caller re-pins junk (value 9). Reports: the losses
and final weights of both runs, whether the kept gradient taps match eager, whether any junk
byte changed, and the pinned bytes held after the callables are dropped and host_empty_cache()
is called once (vs. the baseline before the model existed).

Env: STEPS (default 3).
"""

import gc

import torch
from _lib.scenario import env_int, held_bytes, npu_version, report, side_stream

import torch_npu_pinpool

STEPS = env_int("STEPS", 3)
SCALE = 0.5  # the staged constant
KEPT: dict[tuple, torch.Tensor] = {}  # the kept pinned D2H buffer per gradient shape


class Tap(torch.autograd.Function):
    """Identity; its backward copies the gradient to pinned host memory (a kept buffer and a
    temporary that dies at once), like a gradient-logging or offload hook."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        kept = KEPT.setdefault(tuple(grad.shape), torch.empty(grad.shape, pin_memory=True))
        kept.copy_(grad, non_blocking=True)
        temp = torch.empty(grad.shape, pin_memory=True)
        temp.copy_(grad, non_blocking=True)
        del temp
        return grad


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stage = torch.full((4,), SCALE).pin_memory()  # pinned staging buffer, freed at once
        scale = torch.empty(4, device=x.device)
        scale.copy_(stage, non_blocking=True)
        del stage
        return Tap.apply(self.fc2(torch.relu(self.fc1(x))) * scale)


def train(model: torch.nn.Module, step_fn, xs, ys) -> tuple[list[float], list[bool], list]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, junk_ok, taps = [], [], []
    junk: list[torch.Tensor] = []
    for x, y in zip(xs, ys):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(step_fn(x), y)
        loss.backward()
        opt.step()
        torch.npu.synchronize()
        losses.append(loss.item())
        taps.append([t.tolist() for t in KEPT.values()])
        junk_ok.append(all(bool((j == 9.0).all()) for j in junk))
        # Re-pin junk between calls: the blocks freed above are handed out again.
        junk = []
        torch_npu_pinpool.host_empty_cache()
        junk = [torch.full((4, 4), 9.0).pin_memory() for _ in range(8)]
    torch.npu.synchronize()
    junk_ok.append(all(bool((j == 9.0).all()) for j in junk))
    return losses, junk_ok, taps


side_stream()
baseline = held_bytes()
torch.manual_seed(0)
xs = [torch.randn(4, 8, device="npu") for _ in range(STEPS)]
ys = [torch.randn(4, 4, device="npu") for _ in range(STEPS)]
eager_model = MLP().npu()
graphed_model = MLP().npu()
graphed_model.load_state_dict(eager_model.state_dict())

e_loss, e_junk, e_taps = train(eager_model, eager_model, xs, ys)
KEPT.clear()
graphed = torch.npu.make_graphed_callables(graphed_model, (xs[0].clone(),))
g_loss, g_junk, g_taps = train(graphed_model, graphed, xs, ys)

weights_equal = all(
    torch.allclose(a.cpu(), b.cpu(), rtol=1e-5, atol=1e-6)
    for a, b in zip(eager_model.parameters(), graphed_model.parameters())
)
held_while_alive = held_bytes()
del graphed, graphed_model
KEPT.clear()
gc.collect()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
report(
    {
        "eager_loss": e_loss,
        "graphed_loss": g_loss,
        "weights_equal": weights_equal,
        "taps_equal": e_taps == g_taps and len(g_taps[-1]) == 1,
        "eager_junk_intact": e_junk,
        "graphed_junk_intact": g_junk,
        "npu_version": list(npu_version()),
        "baseline": baseline,
        "held_while_alive": held_while_alive,
        "held_after_drop": held_bytes(),
    }
)
