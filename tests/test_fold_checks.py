"""A fold whose weights come out broken (inf, NaN, or swamped by alpha = 1e30) is refused and undone (issue 12)."""

import pytest
import torch
from torch import nn

from platonic import EditSiteError, LinearSite, Operator, fold
from platonic.bank import Term


def _linear_and_operator(scale=1.0):
    torch.manual_seed(0)
    lin = nn.Linear(6, 4)
    op = Operator(delta=scale * torch.randn(4, 4), form="linear", target="t", terms=(Term(1.0, "s", "task"),))
    return lin, op


@pytest.mark.parametrize("alpha,scale,match", [(1e30, 1.0, "times their norm"), (1e10, 1e30, "non-finite")])
def test_fold_refuses_broken_weights_and_restores_them(alpha, scale, match):
    lin, op = _linear_and_operator(scale)
    before = {k: v.clone() for k, v in lin.state_dict().items()}
    with pytest.raises(EditSiteError, match=f"{match}.*restored"):
        fold(LinearSite(lin), op, alpha)
    assert all(torch.equal(before[k], v) for k, v in lin.state_dict().items())


def test_fold_at_the_papers_strengths_is_unchanged():
    lin, op = _linear_and_operator()
    record = fold(LinearSite(lin), op, 1.0)
    assert record.alpha == 1.0 and not torch.equal(record.original["weight"], lin.weight)
