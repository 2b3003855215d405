"""The notes (kind, text) a verdict carries: what passed with a caveat (a pair set aside, elements forgiven beyond
the strict tolerance and why, a coarse tolerance scale, what the compile-only opinion says)."""

from __future__ import annotations

from ..core.backend_spec import COMPILE_ONLY
from ..core.rerun import CARRIED, MODELLED
from ..core.tolerance import LOADED_ROUNDINGS
from . import edges, sensitivity
from .classify import DISCARD, describe_discard
from .comparison import Forgiven
from .evidence import Evidence, Pair


def notes(ev: Evidence) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for p in ev.pairs:
        if p.classification.action == DISCARD:
            out.append((f"discard:{p.a} vs {p.b}", f"{p.a} vs {p.b} not compared: "
                                                   f"{describe_discard(p.classification)}"))
        if p.comparison is None:
            continue
        for f in p.comparison.forgiven:
            out.append(forgiven_note(p, f))
        if p.comparison.coarse:
            tf32 = ", tf32 rounding allowed (a tl.dot at default precision in the kernel's source)" \
                if p.comparison.tf32_from_source else ""
            out.append(("coarse", f"{p.a} vs {p.b}: `{', '.join(sorted(set(p.comparison.coarse)))}` judged with a "
                                  f"coarse tolerance scale (no interpreter dataflow for those elements){tf32}"))
    for r in ev.reports.values():
        out += r.notes
    return out


def forgiven_note(p: Pair, f: Forgiven) -> tuple[str, str]:
    """The caveat (kind, text) for elements a comparison let pass beyond the strict tolerance."""
    (j, x, y) = f.example
    head = f"{p.a} vs {p.b}: {f.count} element(s) of `{f.target}`"
    if f.why == sensitivity.FLOAT32_COMPUTATION:
        flagged = f"; flagged {', '.join(f.flags)}" if f.flags else ""
        return ("float32 computation",
                f"{head} differ from the float64 reference beyond what one rounding of the inputs explains, within "
                f"what a float32 computation of the reference gives ({sensitivity.ACCUMULATION:g} times its error, "
                f"or once the error of one rounded faithfully (every operation one ulp either way, its gradient "
                f"computed from those results); for an index or integer any value such computations give; or "
                f"what one gives whose math functions flush subnormals to zero, as a GPU's do: "
                f"{f.spread:.3g} at {j}: {x:.6g} vs {y:.6g}; or {LOADED_ROUNDINGS:g} float32 roundings "
                f"of the largest input loaded){flagged}: the kernel is as accurate as float32 "
                "arithmetic of your reference's formula, not more; not failed")
    if f.why == CARRIED:
        return ("kernel rounding through launch",
                f"{head}, which `launch` computes from what the kernel wrote, differ beyond the strict tolerance "
                f"(e.g. at {j}: {x:.6g} vs {y:.6g}), within what the kernel's own rounding does to them: "
                f"{f.spread:.3g} there, over {f.measured} runs of the case whose stores move each value the kernel "
                f"computed by {LOADED_ROUNDINGS:g} float32 roundings of the largest input its program "
                "loaded: not failed")
    if f.why == edges.UNDERFLOW_EDGE:
        return ("range-edge (underflow)",
                f"{head} differ within {edges.BOTTOM_TINIES} of float32's smallest normal values of zero (e.g. at {j}: "
                f"{x:.6g} vs {y:.6g}), where a value on their way fell below the normal range: float32 arithmetic "
                "keeps nothing finer there; not failed")
    if f.why == MODELLED:
        return ("GPU arithmetic (NaN/inf)",
                f"{head} differ in a NaN or an infinity (e.g. at {j}: {x:.6g} vs {y:.6g}) that the kernel's own "
                f"arithmetic gives on this case, each value in a run of it: {f.detail} (modelled runs: the "
                "interpreter computing as the GPU does, tf32 dot operands, fused multiply-adds, flushed subnormals, "
                "float32 division as div.full, rounded to nearest and at random): a rounding dispute, not failed")
    if f.why == "measured":
        return ("measured", f"{head} differ beyond the strict tolerance but within the problem's measured sensitivity "
                            f"(e.g. at {j}: {x:.6g} vs {y:.6g}, where the problem moves by {f.spread:.3g} "
                            f"over {f.measured} runs of the reference on inputs moved by one rounding, in float64 and "
                            f"computed in float32); flagged {', '.join(f.flags)}: "
                            "not failed")
    if f.why == sensitivity.SCALE:
        return ("dataflow scale, unmeasured",
                f"{head} differ from the reference beyond the strict tolerance, within the kernel's dataflow scale "
                f"(e.g. at {j}: {x:.6g} vs {y:.6g}), and nothing measured what the problem allows there "
                f"({f.unmeasured}): not failed")
    if f.why == sensitivity.FLOAT32_OVERFLOW:
        return ("range-edge (float32 overflow)",
                f"{head} differ where {'the case holds' if f.coarse else 'the kernel computed from'} inputs at the "
                f"limits of float32's range and an overflow happened on the way, while the exact result fits (e.g. at "
                f"{j}: {x:.6g} vs {y:.6g}): float32 arithmetic, the widest kernels use, gives no better there, and "
                "perturbing the inputs does not measure it: not failed")
    unmeasured = f" (not measured: {f.unmeasured}; the flag forgave them)" if f.unmeasured else ""
    kind = ("near-tie" if f.why == "fragile" else "range-edge") + (", unmeasured" if f.unmeasured else "")
    if f.why == "fragile":
        return (kind, f"{head} were decided by comparing computed values within tolerance of each other (e.g. an "
                      "argmax among near-ties), or computed from a value within its rounding error of a pole (e.g. the "
                      f"rsqrt of a variance that is rounding noise; at {j}: {x:.6g} vs {y:.6g}){unmeasured}: "
                      "not failed")
    how = "the case's inputs reach the dtype's limits" if f.coarse and f.unmeasured else \
        "values at the dtype's limits overflowed on the way" if f.unmeasured else \
        "the exact result does not fit the dtype"
    return (kind, f"{head} differ only at the range edge (e.g. at {j}: {x:.6g} vs {y:.6g}; {how}){unmeasured}: "
                  "not failed")


def compile_only_notes(ev: Evidence) -> list[tuple[str, str]]:
    return [("compile-only", text) for o in ev.outcomes.values() if o.role.kind == COMPILE_ONLY for text in o.notes]
