"""The mismatch report: one screen saying where, by how much, which program, and who is wrong."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from ..core.case import Case
from ..core.outcome import Outcome
from ..judge.comparison import Comparison, Mismatch
from ..judge.evidence import Evidence
from ..judge.verdict import Verdict


def _backend_line(o: Outcome) -> str:
    bits = [f"{o.seconds * 1e3:.1f} ms"]
    if o.compiles:
        bits.append(f"{o.compiles} compile(s), {o.compile_seconds * 1e3:.0f} ms")
    if o.trace is not None and o.trace.sampled:
        bits.append(f"{len(o.trace.programs_run)} sampled program(s)")
    return f"{o.backend} ({', '.join(bits)})"


def _programs(m: Mismatch, grid: tuple[int, int, int] | None) -> str:
    if not m.programs:
        return ""
    def name(pid: int) -> str:
        if pid < 0:
            return "no program (never written)"
        if grid is None or (grid[1] == 1 and grid[2] == 1):
            return f"program {pid}"
        x = pid % grid[0]
        y = (pid // grid[0]) % grid[1]
        z = pid // (grid[0] * grid[1])
        return f"program ({x}, {y}, {z})"
    parts = [f"{name(p)}: {n}" for p, n in m.programs[:8]]
    more = f", and {len(m.programs) - 8} more" if len(m.programs) > 8 else ""
    return "      written by " + ", ".join(parts) + more


def describe_mismatch(m: Mismatch, a: str, b: str, grid: tuple[int, int, int] | None) -> list[str]:
    if m.kind != "values" or not m.total:
        return [f"  - {m.message}"]
    lines = [f"  - `{m.target}`: {m.count} of {m.total} elements differ ({100 * m.share:.3g}%), "
             f"tolerance {m.tolerance}"]
    if m.count > m.special and m.max_abs > 0:
        lines += [f"      largest absolute difference {m.max_abs:.6g} at {m.max_abs_index}",
                  f"      largest relative difference {m.max_rel:.6g} at {m.max_rel_index}"]
    if m.special:
        lines.append(f"      {m.special} element(s) NaN or infinite on one side only")
    for idx, x, y in m.examples[:3]:
        lines.append(f"      at {idx}: {a} = {x:.9g}, {b} = {y:.9g}")
    p = _programs(m, grid)
    if p:
        lines.append(p)
    return lines


def _comparisons(ev: Evidence, verdict: Verdict) -> list[Comparison]:
    """The comparisons to show: the verdict's pair first, then other diverging pairs."""
    out: list[Comparison] = []
    if verdict.pair is not None:
        p = ev.pair(*verdict.pair)
        if p is not None and p.comparison is not None and not p.comparison.ok:
            out.append(p.comparison)
    for p in ev.pairs:
        if p.comparison is not None and not p.comparison.ok and p.comparison not in out:
            out.append(p.comparison)
    return out


def render(check_id: str, case: Case, verdict: Verdict, ev: Evidence, extra: list[str] | None = None) -> str:
    """The report of one failing case: verdict, case, opinions, what differs and where."""
    outcomes = list(ev.outcomes.values())
    grid = next((o.grid() for o in outcomes if o.grid()), None)
    lines = [f"tdiff: {verdict.label} on {check_id}"]
    lines += [f"    {r}" for r in verdict.reasons[:6]]
    lines.append(f"  case: {case.describe()}")
    if grid is not None:
        launches = next((o.launches for o in outcomes if o.launches), [])
        lines.append(f"  grid: {grid}" + (f" ({len(launches)} launches)" if len(launches) > 1 else ""))
    lines.append("  opinions: " + ", ".join(_backend_line(o) for o in outcomes))
    others = [o for o in outcomes if o.environment]
    if others:
        from ..execute.environments import versions_here

        lines.append("  environments: " + "; ".join(f"{o.backend}: {o.environment}" for o in others)
                     + f"; the others: {versions_here()}")
    for o in outcomes:
        if o.trace is not None and o.trace.sampled and grid is not None:
            shown = ", ".join(str(p) for p in o.trace.programs_run[:12])
            more = " ..." if len(o.trace.programs_run) > 12 else ""
            lines.append(f"  {o.backend} interpreted {len(o.trace.programs_run)} of {grid[0] * grid[1] * grid[2]} "
                         f"programs: {shown}{more}; only what they wrote is compared with it")
    if verdict.kind == "values":
        for cmp in _comparisons(ev, verdict)[:2]:
            lines.append(f"  {cmp.a.backend} vs {cmp.b.backend}:")
            for m in cmp.mismatches:
                lines += describe_mismatch(m, cmp.a.backend, cmp.b.backend, grid)
    for o in outcomes:
        if o.error is not None and o.error.details and o.error.kind in ("crash", "timeout", "cuda"):
            tail = o.error.details.strip().splitlines()[-8:]
            lines.append(f"  {o.backend} output (last lines):")
            lines += [f"      {t}" for t in tail]
    for key, o in ev.extra.items():
        lines.append(f"  rerun {key}: " + (f"failed: {o.error.summary()}" if o.error else f"{o.seconds * 1e3:.1f} ms"))
    lines += [f"  note: {text}" for _, text in verdict.notes[:4]]
    lines += [f"  {e}" for e in (extra or [])]
    return "\n".join(lines)


# ------------------------------------------------------------------ pictures

def _png(rgb: np.ndarray) -> bytes:
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def mismatch_picture(mask: np.ndarray, path: Path, max_pixels: int = 512) -> Path | None:
    """Save a PNG of a 2-D mismatch mask: red where elements differ, light grey where they agree."""
    if mask is None or mask.ndim != 2 or mask.size == 0:
        return None
    h, w = mask.shape
    cell = max(1, min(16, max_pixels // max(h, w)))
    rgb = np.where(mask[..., None], np.array([220, 30, 30]), np.array([235, 235, 235]))
    rgb = np.repeat(np.repeat(rgb, cell, axis=0), cell, axis=1)
    if cell >= 4:  # grid lines between elements
        rgb[::cell, :, :] = 255
        rgb[:, ::cell, :] = 255
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_png(rgb))
    return path


def save_pictures(comparisons: list[Comparison], folder: Path) -> list[Path]:
    out = []
    for m in (m for cmp in comparisons[:1] for m in cmp.mismatches):
        if m.kind == "values" and m.mask is not None and m.mask.ndim == 2:
            name = "".join(c if c.isalnum() or c in "._-" else "_" for c in m.target)
            p = mismatch_picture(m.mask, folder / f"{name}.png")
            if p:
                out.append(p)
    return out
