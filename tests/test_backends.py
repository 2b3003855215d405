"""Outcomes as whole storages: bytes outside the view, guard bands, own copies, launch records."""

import numpy as np
import pytest
import torch

import tdiff
from tdiff.core.case import Case, TensorArg
from tdiff.core.outcome import CANARY, GUARD_BYTES
from tdiff.execute.backends.reference import ReferenceBackend
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.execute.plan import LaunchPlan
from tdiff.judge import integrity
from tdiff.judge.compare import compare
from tdiff.judge.targets import storage_values
from tdiff.strategies import tensor_arg
from tests import kernels as K

pytestmark = pytest.mark.triton_matrix  # CI repeats these under every allowed Triton minor


def split_half(second: bool) -> TensorArg:
    parent = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    a, b = torch.split(parent, [2, 4], dim=1)
    return tensor_arg(b if second else a, layout="split")


def test_rebuilt_views_keep_their_exact_layout():
    arg = split_half(second=True)
    plan = LaunchPlan(Case({"t": arg}))
    t = plan.inputs["t"]
    assert (t.shape, t.stride(), t.storage_offset() - GUARD_BYTES // 4) == ((4, 4), (6, 1), 2)
    assert torch.equal(t, torch.arange(24, dtype=torch.float32).reshape(4, 6)[:, 2:])
    buf = plan.allocations["t"].buffer.numpy().tobytes()
    assert buf[:GUARD_BYTES] == (CANARY * GUARD_BYTES)[:GUARD_BYTES]


def test_write_through_split_half_lands_in_the_parent_storage_only():
    check = K.inplace_add_one.__tdiff_checks__[0]
    for second in (False, True):
        arg = split_half(second)
        case = Case({"t": arg})
        out = InterpreterBackend().run(check, case)
        assert out.error is None
        final = storage_values(out.storages["t"]).reshape(4, 6)
        expect = np.arange(24, dtype=np.float32).reshape(4, 6)
        cols = slice(2, 6) if second else slice(0, 2)
        expect[:, cols] += 1
        assert np.array_equal(final, expect)  # the other half's bytes are untouched
        assert compare(out, ReferenceBackend().run(check, case), case).ok


def test_writing_outside_the_view_shows_in_the_other_half_and_guard_bands():
    check = K.inplace_overrun.__tdiff_checks__[0]
    case = Case({"t": split_half(second=False)})
    out = InterpreterBackend().run(check, case)
    found = integrity.check(out, case, "inplace_overrun", runs_kernel=True).findings
    gap = next(f for f in found if f.kind == integrity.GAP)  # column 2 of each row belongs to the other half
    assert "outside its view" in gap.message and gap.count == 4


def test_users_tensors_are_never_touched_and_each_backend_has_its_own_copy():
    check = K.inplace_add_one.__tdiff_checks__[0]
    user = torch.zeros(3, 5)
    arg = tensor_arg(user)
    case = Case({"t": arg})
    before = arg.storage.copy()
    a = InterpreterBackend().run(check, case)
    b = InterpreterBackend().run(check, case)
    assert torch.equal(user, torch.zeros(3, 5)) and np.array_equal(arg.storage, before)
    assert np.array_equal(storage_values(a.storages["t"]), np.ones(15, np.float32))
    assert np.array_equal(storage_values(b.storages["t"]), np.ones(15, np.float32))  # not 2: fresh copies


def test_launch_records_and_writers():
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(130, dtype=torch.float32))})
    out = InterpreterBackend().run(check, case)
    (rec,) = out.launches
    assert rec.kernel == "double_kernel" and rec.grid == (3, 1, 1)
    assert rec.args[0] == {"kind": "input", "name": "x", "shape": [130], "strides": [1], "offset": 0,
                           "dtype": "float32"}
    assert rec.args[1]["kind"] == "tensor" and rec.args[2] == {"kind": "scalar", "value": 130}
    writers = out.trace.writers["returned"]
    assert list(writers[[0, 63, 64, 127, 128, 129]]) == [0, 0, 1, 1, 2, 2]
    assert out.returned_args["returned"]["arg"] == "1"


def test_torch_empty_is_filled_while_a_launch_runs():
    # torch.empty is filled (NaN / the largest integer), so garbage never differs between backends and
    # an element nobody wrote is recognisable
    from tdiff.execute.plan import deterministic_empty

    with deterministic_empty():
        t, i = torch.empty(8), torch.empty(8, dtype=torch.int32)
    assert torch.isnan(t).all() and (i == 2**31 - 1).all()


def test_compiled_variants_parse_label_and_validate():
    from tdiff.core.backend_spec import BackendSpec, role_of
    from tdiff.core.backend_spec import label_kind as kind_of
    from tdiff.judge.verdict import wrong
    from tdiff.options import split_backends

    s = BackendSpec.parse("compiled[num_warps=2,num_stages=1,config=3]")
    assert (s.kind, s.launch, s.config, s.lane) == ("compiled", (("num_warps", 2), ("num_stages", 1)), 3, "gpu")
    assert s.label == "compiled[num_warps=2,num_stages=1,config=3]" and kind_of(s.label) == "compiled"
    assert BackendSpec.parse("compiled[fp_fusion=off]").launch == (("enable_fp_fusion", False),)
    assert BackendSpec.parse("compiled[fp_fusion=off]").label == "compiled[fp_fusion=off]"
    assert wrong(role_of("compiled[num_warps=2]")) == "compiled[num_warps=2] wrong" \
        and wrong(role_of("compiled")) == "compiled wrong"
    assert split_backends("compiled,compiled[num_warps=2,num_stages=1]") == ("compiled",
                                                                              "compiled[num_warps=2,num_stages=1]")
    for bad, why in [("compiled[num_warps=x]", "positive integer"), ("compiled[warps=2]", "unknown option"),
                     ("interpreter[num_warps=2]", "only compiled"), ("compiled[num_warps]", "name=value")]:
        with pytest.raises(ValueError, match=why):
            BackendSpec.parse(bad)
    with pytest.raises(tdiff.DeclarationError, match="unknown option"):
        tdiff.check(launch=lambda k, x: None, backends=["compiled[warps=2]"], x=1)(K.double_kernel)
    from tdiff.core.case import Case
    from tdiff.core.outcome import Outcome
    from tdiff.judge.evidence import Evidence
    from tdiff.judge.rules import Rules
    from tdiff.record.repro import _variants

    # a reproducer runs a variant with its launch options on top (read from the outcome's spec, not its label);
    # another config cannot be replayed
    sides = ("compiled", "compiled[num_warps=2]", "compiled[config=1]", "reference")
    outcomes = {s: Outcome(s, spec=BackendSpec.parse(s)) for s in sides}
    ev = Evidence(Case({}), "k", outcomes, Rules())
    assert _variants(sides, ev) == {"compiled[num_warps=2]": {"num_warps": 2}, "compiled[config=1]": None}
