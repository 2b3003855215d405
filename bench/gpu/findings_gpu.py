"""The snippets of FINDINGS.md liger 14, 15, 16, 17, 33 and of the layer_norm observation (FlagGems), run on the
compiled kernels (needs a CUDA GPU).

Each prints the library's result beside the reference's; the finding holds where they differ as FINDINGS.md says.
"""

from __future__ import annotations

import torch


def liger_14() -> None:
    from liger_kernel.ops.group_norm import LigerGroupNormFunction

    f16 = dict(device="cuda", dtype=torch.float16)
    X = torch.tensor([[[0.0, 0.0, 8.0]]], **f16, requires_grad=True)
    W, B = torch.zeros(1, **f16, requires_grad=True), torch.zeros(1, **f16, requires_grad=True)
    dY = torch.tensor([[[0.0, 5.0, 0.0]]], **f16)
    LigerGroupNormFunction.apply(X, W, B, 1, 1, 1e-6).backward(dY)
    Xd, Wd, Bd = (t.detach().double().requires_grad_() for t in (X, W, B))
    torch.nn.functional.group_norm(Xd, 1, Wd, Bd, 1e-6).backward(dY.double())
    got, want = W.grad.item(), Wd.grad.half().item()
    print("liger 14: dW", got, "reference", want, "holds:", got != want)


def liger_15() -> None:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    X = torch.full((1, 1), 1e13, device="cuda", requires_grad=True)
    W = torch.full((1,), 1e13, device="cuda", requires_grad=True)
    LigerRMSNormFunction.apply(X, W, 1e-6, 0.0, "llama", False).backward(torch.full((1, 1), 1e13, device="cuda"))
    print("liger 15: dX", X.grad.item(), "holds:", not torch.isfinite(X.grad).all().item())


def liger_16() -> None:
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction

    x = torch.full((1, 1), -float("inf"), device="cuda")
    out = LigerCrossEntropyFunction.apply(x, torch.zeros(1, dtype=torch.long, device="cuda"), None, -100, 1e-4, 0.0,
                                          "mean", None, True)
    z = out[1]
    want = 1e-4 * torch.logsumexp(x.double(), -1) ** 2
    print("liger 16: z_loss", z.item(), "torch", want.item(), "holds:", bool(torch.isnan(z).all()))


def liger_17() -> None:
    """FINDINGS.md liger 17 / triton 14: hidden size 1, float16, casting_mode "none"."""
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction

    f16 = dict(dtype=torch.float16, device="cuda")
    X = torch.zeros((1, 1), **f16, requires_grad=True)
    R = torch.zeros((1, 1), **f16, requires_grad=True)
    W = torch.ones(1, **f16, requires_grad=True)
    Y, S = LigerFusedAddRMSNormFunction.apply(X, R, W, 1e-6, 0.0, "none", False)
    Y.backward(torch.ones_like(Y))
    two = torch.zeros((1, 2), **f16, requires_grad=True)
    Y2, _ = LigerFusedAddRMSNormFunction.apply(two, torch.zeros((1, 2), **f16), torch.ones(2, **f16), 1e-6, 0.0,
                                               "none", False)
    Y2.backward(torch.ones_like(Y2))
    print("liger 17: dX (hidden 1)", X.grad.flatten().tolist(), "dX (hidden 2)", two.grad.flatten().tolist(),
          "holds:", bool(torch.isnan(X.grad).any() and torch.isfinite(two.grad).all()))


def liger_33() -> None:
    """FINDINGS.md liger 33: casting_mode "none", no weight, float16: `rstd * dY` overflows where dX fits."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    x = torch.tensor([[0.0, 0.8218]], dtype=torch.float16, device="cuda", requires_grad=True)
    dy = torch.tensor([[0.0, 65504.0]], dtype=torch.float16, device="cuda")
    LigerRMSNormFunction.apply(x, None, 1e-6, 0.0, "none", False).backward(dy)
    xd = x.detach().double().requires_grad_()
    (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6)).backward(dy.double())
    print("liger 33: dX", x.grad.flatten().tolist(), "float64 autograd", xd.grad.flatten().tolist(),
          "holds:", bool(torch.isinf(x.grad).any() and torch.isfinite(xd.grad).all()))


def layer_norm_observation() -> None:
    import flag_gems

    # 40961 columns: several TILE_N steps whichever config the autotuner picks (one step cannot show it)
    x = torch.zeros(1, 40961, device="cuda")
    x[0, 0] = -float("inf")
    _, mean, _ = torch.ops.aten.native_layer_norm(x, (40961,), None, None, 1e-5)
    _, mean_cpu, _ = torch.ops.aten.native_layer_norm(x.cpu(), (40961,), None, None, 1e-5)
    with flag_gems.use_gems():
        _, mean2, _ = torch.ops.aten.native_layer_norm(x, (40961,), None, None, 1e-5)
    print("layer_norm observation: FlagGems mean", mean2.flatten().tolist(), "torch cuda", mean.flatten().tolist(),
          "torch cpu", mean_cpu.flatten().tolist(), "exact -inf; FlagGems matches torch:",
          bool(torch.isnan(mean2).all() and torch.isnan(mean).all()))


if __name__ == "__main__":
    for f in (liger_14, liger_15, liger_16, liger_17, liger_33, layer_norm_observation):
        try:
            f()
        except Exception as exc:  # noqa: BLE001  one snippet failing does not hide the others
            print(f"{f.__name__}: {type(exc).__name__}: {exc}")
