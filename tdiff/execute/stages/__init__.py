"""Multi-level opinions: recompile a kernel from each stage of Triton's compiler, run a user's edited IR, and
name the compiler pass after which a result goes wrong.

- `compiled[from=<stage>]` (`launch`): each launch recompiled from its own TTIR, TTGIR, LLVM IR or PTX through
  Triton's `ir_override`, checked to round-trip exactly (`roundtrip`).
- `compiled[ir=<file>]` (`launch`, `ir_override`): a user's IR file, as a content-hashed copy, for the
  launches of its specialization.
- `localize` (`localize`, `bisect`, `snapshots`, `ablate`, `passes`): the first pass after which a
  `compiled wrong` case diverges, from MLIR's per-pass snapshots, confirmed by ablation.

Everything but launching works without a GPU (`toolchain.compile_only`).
"""

from .bisect import AGREE, DIVERGE, FOUND, NONE_AGREE, NOT_REPRODUCED, UNKNOWN, Bisection, Probe
from .localizer import Check, Localization, Localized, capture_jobs, export_stage, localize, localize_job
from .roundtrip import LANE_REASONS, LaneError, RoundTrip, round_trip
from .support import FROM_STAGES, STAGES, StageUnsupported
from .toolchain import CompileJob, compile_only, job_of

__all__ = ["AGREE", "DIVERGE", "FOUND", "FROM_STAGES", "LANE_REASONS", "NONE_AGREE", "NOT_REPRODUCED", "STAGES",
           "UNKNOWN", "Bisection", "Check", "CompileJob", "LaneError", "Localization", "Localized", "Probe",
           "RoundTrip", "StageUnsupported", "capture_jobs", "export_stage", "compile_only", "job_of", "localize",
           "localize_job", "round_trip"]
