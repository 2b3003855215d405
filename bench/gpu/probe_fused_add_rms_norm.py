"""Probe (GPU): liger-kernel 0.8.5 `_fused_add_rms_norm_backward_kernel` on shapes with a size-1 dimension.

The boundary plan's main job on an H200 found `compiled wrong` on the case S=float16[1, 1] (one row, one
column), casting_mode "none", dY, dS_out and W zeroed by shrinking: compiled dX = nan where the
interpreter and the float64 reference give 0. This script launches the kernel as liger's backward does
(the suite's `launch_bwd`), compiled, over a grid of shapes, values, dtypes and num_warps, and prints where
dX or dW is not finite or differs from the float64 reference, to tell a compiler bug from a tdiff artefact.

    python -m bench.gpu.probe_fused_add_rms_norm        (needs a CUDA GPU and liger-kernel)
"""

from __future__ import annotations

import itertools

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA GPU")
        return 2
    from suites.liger.fused_add_rms_norm import launch_bwd, lib, reference_bwd

    kernel = lib._fused_add_rms_norm_backward_kernel
    rows = []
    for (n_rows, n_cols), dt, s_val, dy_val, w_val, mode in itertools.product(
            [(1, 1), (2, 1), (1, 2), (3, 1), (1, 3), (4, 4)], [torch.float16, torch.float32],
            [0.5, -3.0, 0.0], [0.0, 1.0], [0.0, 1.0], ["none", "llama", "gemma"]):
        dev = "cuda"
        S = torch.full((n_rows, n_cols), s_val, dtype=dt, device=dev)
        dY = torch.full((n_rows, n_cols), dy_val, dtype=dt, device=dev)
        dS = torch.zeros((n_rows, n_cols), dtype=dt, device=dev)
        W = torch.full((n_cols,), w_val, dtype=dt, device=dev)
        dx, dw = launch_bwd(kernel, dY.clone(), dS.clone(), S.clone(), W.clone(), 0.0, mode, False)
        torch.cuda.synchronize()
        rx, rw = reference_bwd(dY.cpu().clone(), dS.cpu().clone(), S.cpu().clone(), W.cpu().clone(), 0.0, mode, False)
        bad_x = (~torch.isfinite(dx.cpu().float())).sum().item()
        diff_x = (dx.cpu().float() - rx.float()).abs().max().item()
        bad_w = (~torch.isfinite(dw.cpu().float())).sum().item()
        if bad_x or bad_w or diff_x > 1e-2:
            rows.append(f"rows={n_rows} cols={n_cols} {str(dt)[6:]} S={s_val} dY={dy_val} W={w_val} mode={mode}: "
                        f"dX non-finite {bad_x}, max |dX - ref| {diff_x:.3g}, dW non-finite {bad_w}; "
                        f"dX={dx.cpu().flatten()[:4].tolist()} ref={rx.flatten()[:4].tolist()}")
    print(f"{len(rows)} launch(es) of {6 * 2 * 3 * 2 * 2 * 3} differ or are not finite")
    for r in rows[:40]:
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
