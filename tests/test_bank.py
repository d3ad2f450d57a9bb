"""Operator and OperatorBank: solving, composing, fingerprints."""

import pytest
import torch
from helpers import make_descriptor, make_grid
from test_storage import make_operator

from platonic import FingerprintMismatchError, InvalidInputError, Operator, OperatorBank, RidgeSolver, solve


def target_grid(grid, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    F = torch.nn.functional.normalize(torch.randn(grid.n_probes, d, generator=g, dtype=torch.float64), dim=1)
    G = torch.nn.functional.normalize(torch.randn(grid.n_prompts, d, generator=g, dtype=torch.float64), dim=1)
    return F, G


def test_operator_solve_is_transpose_of_solution_and_reports_residual():
    desc = make_descriptor(make_grid(n=20, m=4))
    F, G = target_grid(desc.grid)
    desc = type(desc)(desc.matrix.double(), desc.grid, desc.provenance)
    op = Operator.solve(F, G, desc, target="fp")
    assert torch.equal(op.delta, solve(F, G, desc.matrix).T.contiguous())
    assert 0 <= op.residual <= 1.0
    assert op.terms[0].task == "toy" and op.terms[0].source == "model-a"
    shared = Operator.from_solver(RidgeSolver(F, G), desc, target="fp")
    assert torch.equal(shared.delta, op.delta)


def test_operator_solve_rejects_embeddings_of_other_probes():
    desc = make_descriptor(make_grid(n=20, m=4))
    F, G = target_grid(make_grid(n=10, m=4))
    with pytest.raises(InvalidInputError, match="embed the descriptor's own probes"):
        Operator.solve(F, G, desc, target="fp")


def test_bank_compose_is_signed_sum_and_matches_solving_the_sum():
    """Linearity end to end: composing bank entries == solving the summed descriptor."""
    grid = make_grid(n=20, m=4)
    F, G = target_grid(grid)
    a = make_descriptor(grid, seed=1, source="src-a")
    b = make_descriptor(grid, seed=2, source="src-b")
    c = make_descriptor(make_grid("dtd", n=20, m=4, seed=5), seed=3, source="src-a")
    bank = OperatorBank("fp", [Operator.solve(F, G, d, target="fp") for d in (a, b, c)])
    assert len(bank) == 3 and bank.tasks == ["dtd", "toy"]
    composed = bank.compose({"toy@src-a": 1.0, ("src-b", "toy"): 1.0, "dtd": -0.5})
    expected = solve(F, G, a.matrix + b.matrix).T - 0.5 * solve(F, G, c.matrix).T
    assert torch.allclose(composed.delta.double(), expected.double(), atol=1e-6)
    assert [(t.coefficient, t.task) for t in composed.terms] == [(1.0, "toy"), (1.0, "toy"), (-0.5, "dtd")]


def test_bank_key_errors_name_the_problem():
    bank = OperatorBank("fp-target", [make_operator("toy", "src-a"), make_operator("toy", "src-b", seed=1)])
    with pytest.raises(InvalidInputError, match="has 2 sources"):
        bank.compose({"toy": 1.0})
    with pytest.raises(InvalidInputError, match="no task 'dtd'; it holds: toy"):
        bank.compose({"dtd": 1.0})
    with pytest.raises(InvalidInputError, match="at least one"):
        bank.compose({})
    with pytest.raises(InvalidInputError, match="already holds"):
        bank.add(make_operator("toy", "src-a"))


def test_bank_refuses_other_targets_naming_both():
    bank = OperatorBank("fp-siglip")
    with pytest.raises(FingerprintMismatchError, match="fp-siglip.*fp-clip"):
        bank.require_target("fp-clip")
    with pytest.raises(FingerprintMismatchError, match="solved for target fp-other.*bank's target is fp-siglip"):
        bank.add(make_operator(target="fp-other"))
    bank.require_target("fp-siglip")  # the right target passes


def test_operator_algebra():
    a, b = make_operator(seed=1), make_operator("other", seed=2)
    assert torch.allclose((a - 2 * b).delta, a.delta - 2 * b.delta)
    assert torch.allclose(sum([a, b]).delta, a.delta + b.delta)
    assert torch.equal((-a).delta, -a.delta)
    with pytest.raises(FingerprintMismatchError):
        a + make_operator(target="elsewhere")


@pytest.mark.parametrize("kw,match", [(dict(form="cubic"), "form must be one of"),
                                      (dict(delta=torch.zeros(3, 4)), "square"),
                                      (dict(target=""), "fingerprint")])
def test_operator_validation(kw, match):
    base = dict(delta=torch.zeros(4, 4), form="linear", target="fp", terms=())
    with pytest.raises(InvalidInputError, match=match):
        Operator(**{**base, **kw})


def test_from_solver_is_the_solve_with_a_shared_factorisation():
    desc = make_descriptor(make_grid(n=20, m=4))
    F, G = target_grid(desc.grid)
    with pytest.raises(InvalidInputError, match="needs a RidgeSolver"):
        Operator.from_solver((F, G), desc, target="fp")
    with pytest.raises(InvalidInputError, match="needs a Descriptor"):
        Operator.from_solver(RidgeSolver(F, G), desc.matrix, target="fp")


class _Model:
    """The part of a DualEncoder that `apply` uses: an edit site and fingerprints of its weights."""

    def __init__(self):
        from torch import nn

        from platonic.edit import LinearSite

        self.edit_site = LinearSite(nn.Linear(8, 8))
        self._fingerprint = self._base_fingerprint = None

    @property
    def fingerprint(self):
        from platonic.hashing import tensor_digest

        self._fingerprint = self._fingerprint or tensor_digest(self.edit_site.linear.weight.detach())
        return self._fingerprint

    @property
    def base_fingerprint(self):
        return self._base_fingerprint or self.fingerprint

    def invalidate_fingerprint(self):
        self._fingerprint = None

    def record_edit(self, entry, base_fingerprint):  # as DualEncoder.record_edit
        self.edits = [*getattr(self, "edits", []), entry]
        self._base_fingerprint = base_fingerprint
        self.invalidate_fingerprint()


def test_apply_takes_operators_on_the_current_or_pre_edit_weights_and_says_which():
    from platonic import apply

    model = _Model()
    first = make_operator(target=model.fingerprint, d=8)
    assert apply(model, first, alpha=0.1).target_match == "current"
    pre_edit, edited = model.base_fingerprint, model.fingerprint
    assert pre_edit != edited
    assert apply(model, make_operator(target=pre_edit, d=8), alpha=0.1).target_match == "pre-edit"
    assert apply(model, make_operator(target=model.fingerprint, d=8), alpha=0.1).target_match == "current"
    assert [e["target_match"] for e in model.edits] == ["current", "pre-edit", "current"]
    with pytest.raises(FingerprintMismatchError, match="before its platonic edits"):
        apply(model, make_operator(target="another-model", d=8), alpha=0.1)
