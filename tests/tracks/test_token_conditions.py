"""The token-dynamics conditions and integrator on heads whose behaviour is known in closed form.

Constructed heads: sym(W) = L diag(d) L^T (L unit lower-triangular, d > 0) plus a skew part, and
A = L_A diag(s * e) L_A^T plus a skew part with a chosen number of negative signs s, V = sym(W)^-1 A,
so Sylvester's law of inertia fixes the regime. Negative controls: a checker reading the
eigenvalues of V (not the symmetric parts) calls a mixed head divergent; the public code's Q K^T
constraint with a drifted Q gives an indefinite score matrix; a GL action on W_q without the
inverse on W_k changes the head.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import torch

from benchmarks.tracks.tokens import conditions as C
from benchmarks.tracks.tokens import dynamics as D
from benchmarks.tracks.tokens.heads import member_heads, split_heads


def constructed(n: int, negatives: int, rng: np.random.Generator, skew: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    def lower():
        return np.tril(rng.normal(size=(n, n)) * 0.4, -1) + np.eye(n)

    sym_w = (tri := lower()) @ np.diag(rng.uniform(0.5, 2, n)) @ tri.T
    signs = np.ones(n)
    signs[:negatives] = -1
    a = (tri := lower()) @ np.diag(signs * rng.uniform(0.5, 2, n)) @ tri.T
    s, t = rng.normal(size=(n, n)) * skew, rng.normal(size=(n, n)) * skew
    return sym_w + (t - t.T) / 2, np.linalg.solve(sym_w, a + (s - s.T) / 2)


@pytest.mark.parametrize("negatives, regime", [(0, "divergent"), (3, "mixed"), (6, "convergent"), (1, "mixed")])
def test_the_signature_of_sym_a_decides_the_regime(negatives, regime):
    rng = np.random.default_rng(negatives)
    for _ in range(5):
        w, v = constructed(6, negatives, rng)
        result = C.classify(w, v)
        assert result.regime == regime and result.negative_share == pytest.approx(negatives / 6)
        assert result.score_eigenvalues[0] > 0 and result.dimension == 6


def test_an_indefinite_score_matrix_is_undecided_and_simple_cases_are_exact():
    eye = np.eye(4)
    assert C.classify(eye, 2 * eye).regime == "divergent"
    assert C.classify(eye, -0.5 * eye).regime == "convergent"
    assert C.classify(eye, np.diag([1.0, 1, -1, -1])).negative_share == 0.5
    assert C.classify(np.diag([1.0, 1, 1, -1]), eye).regime == "undecided"
    assert C.classify(np.diag([1.0, 1, 1, 1e-9]), eye).regime == "undecided"  # within the tolerance of zero
    with pytest.raises(ValueError, match="square matrices of one size"):
        C.classify(np.eye(3), np.eye(4))


def test_negative_control_eigenvalues_of_v_alone_would_misclassify():
    """V with eigenvalues 1 and 1 (a Jordan-like shear) grows like exp(t) eventually, but sym(V) is
    indefinite: the conditions say mixed, a check of V's eigenvalues would say divergent."""
    v = np.array([[1.0, 6.0], [0.0, 1.0]])
    assert np.all(np.linalg.eigvals(v).real > 0)
    assert C.classify(np.eye(2), v).regime == "mixed"


def test_a_single_token_follows_exp_vt_and_its_norm_obeys_the_bounds_of_sym_v():
    rng = np.random.default_rng(1)
    for negatives in (0, 6):
        w, v = constructed(6, negatives, rng)
        v = v / np.linalg.norm(v, 2)
        x0 = rng.normal(size=6)
        t_end, steps = 2.0, 400
        end, _ = D.rk4(D.attention_field(torch.tensor(w), torch.tensor(v)), torch.tensor(x0)[None, None], t_end, steps)
        exact = scipy.linalg.expm(v * t_end) @ x0
        np.testing.assert_allclose(end[0, 0].numpy(), exact, rtol=1e-7, atol=1e-9)
        low, high = np.linalg.eigvalsh(C.sym(v))[[0, -1]]
        start = np.linalg.norm(x0)
        assert np.exp(low * t_end) * start <= np.linalg.norm(exact) <= np.exp(high * t_end) * start


def test_coinciding_tokens_stay_together_for_any_score_matrix():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(5, 5))
    w = rng.normal(size=(5, 5)) * 3  # indefinite, large: irrelevant when the tokens coincide
    x0 = np.repeat(rng.normal(size=(1, 1, 5)), 7, axis=1)
    end, _ = D.rk4(D.attention_field(torch.tensor(w), torch.tensor(v)), torch.tensor(x0), 1.0, 200)
    np.testing.assert_allclose(end[0].numpy(), np.repeat((scipy.linalg.expm(v) @ x0[0, 0])[None], 7, 0), rtol=1e-8)


def test_rk4_matches_solve_ivp_with_a_mask_rotary_encoding_and_the_diagonal_term():
    rng = np.random.default_rng(3)
    w, v = constructed(4, 2, rng)
    x0 = torch.tensor(rng.normal(size=(2, 5, 4)))
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    field = D.attention_field(torch.tensor(w), torch.tensor(v), mask, D.rotations(5, 4), torch.full((4,), 0.05))
    end, taken = D.rk4(field, x0 * mask[..., None], 1.5, 300)

    def flat(t, y):
        return field(torch.tensor(y).view(2, 5, 4)).flatten().numpy()

    reference = scipy.integrate.solve_ivp(flat, (0, 1.5), (x0 * mask[..., None]).flatten().numpy(), rtol=1e-10,
                                          atol=1e-12).y[:, -1]
    assert taken == 300
    np.testing.assert_allclose(end.flatten().numpy(), reference, rtol=1e-6, atol=1e-8)
    assert (end[1, 3:] == 0).all()  # padding never moves


def test_integration_shows_the_predicted_regime_on_constructed_heads():
    """Divergent heads blow their tokens up; convergent ones shrink them, though not to zero: near zero
    the attention is uniform, dx_i/dt -> V mean(x), so the mean decays while the differences freeze."""
    rng = np.random.default_rng(4)
    for _ in range(3):
        w, v = constructed(6, 0, rng)
        assert D.integrate(w, v, torch.tensor(rng.normal(size=(3, 8, 6)) * 3), units=10, steps=200).growth() > 100
        w, v = constructed(6, 6, rng)
        trajectory = D.integrate(w, v, torch.tensor(rng.normal(size=(3, 8, 6)) * 3), units=10, steps=200)
        assert trajectory.growth() < 0.9 and np.all(np.diff(trajectory.norm) < 1e-9)


def test_rotary_positions_keep_the_score_positive_definite_and_the_diagonal_term_pulls_towards_diag_v():
    rng = np.random.default_rng(5)
    w, v = constructed(4, 0, rng)
    regimes = C.rotary_regimes(w, v, range(0, 40, 7))
    assert all(r.score_eigenvalues[0] > 0 for r in regimes)
    assert C.rotation(3, 4) @ C.rotation(3, 4).T == pytest.approx(np.eye(4))
    pulled = C.rotary_regimes(w, -np.eye(4), [5], diagonal=1e3)[0]
    assert pulled.regime == "convergent"
    with pytest.raises(ValueError, match="must be even"):
        C.rotation(1, 3)


def _member(residual: bool, seed: int):
    from zoo.families import create_family
    from zoo.weightspace import WeightBatch

    architecture = {"d_model": 8, "num_blocks": 3, "num_heads": 4, "head_dim": 2, "mlp_dim": 8, "residual": residual}
    symmetry = create_family("transformer").symmetry(architecture)
    generator = torch.Generator().manual_seed(seed)
    batch = WeightBatch(symmetry.space, tuple(torch.randn(1, *t.shape, generator=generator, dtype=torch.float64)
                                              for t in symmetry.space.tensors))
    return symmetry, batch


def _state(batch) -> dict:
    return {name: tensor[0].numpy() for name, tensor in zip(batch.space.names, batch.tensors)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_residual_members_heads_are_invariant_under_its_attention_group(seed):
    """Residual members (no model-dimension permutations): a random element of `zoo.symmetry`'s group
    (head permutations, GL(d_k) on (W_q, W_k), GL(d_v) on (W_v, O), at condition numbers up to 16)
    permutes the heads and leaves each head's (W, V), hence its regime, unchanged."""
    symmetry, batch = _member(True, seed)
    element = symmetry.sample(torch.Generator().manual_seed(100 + seed), 1)
    before = member_heads(_state(batch), 3, 4)
    after = member_heads(_state(symmetry.act(element, batch)), 3, 4)
    for block in range(3):
        tau = element.heads[block][0].numpy()
        for h in range(4):
            old, new = before[4 * block + tau[h]], after[4 * block + h]
            np.testing.assert_allclose(new.w, old.w, rtol=1e-9, atol=1e-10)
            np.testing.assert_allclose(new.v, old.v, rtol=1e-9, atol=1e-10)
            a, b = C.classify(new.w, new.v), C.classify(old.w, old.v)
            assert a.regime == b.regime and a.negative_share == b.negative_share
            np.testing.assert_allclose(a.value_eigenvalues, b.value_eigenvalues, rtol=1e-8, atol=1e-12)


def test_negative_controls_a_broken_gl_action_and_a_plain_members_model_dimension_permutation():
    symmetry, batch = _member(True, 3)
    state = _state(batch)
    head = member_heads(state, 3, 4)[0]
    queries = state["encoder.0.attention.queries.weight"].copy()
    queries[:2] = np.array([[2.0, 1.0], [0.0, 1.0]]) @ queries[:2]  # GL(d_k) on W_q, no inverse on W_k
    broken = split_heads(queries, state["encoder.0.attention.keys.weight"], state["encoder.0.attention.values.weight"],
                         state["encoder.0.attention.out_projection.weight"], 4, 0)[0]
    assert not np.allclose(broken.w, head.w, atol=1e-3)
    # without residuals the group also permutes the model dimension after the attention (P_O): V -> P_O V,
    # not a similarity, so the heads' (W, V) are not invariant; the test above would fail on them
    symmetry, batch = _member(False, 4)
    element = symmetry.sample(torch.Generator().manual_seed(5), 1)
    before, after = member_heads(_state(batch), 3, 4), member_heads(_state(symmetry.act(element, batch)), 3, 4)
    tau = element.heads[0][0].numpy()
    assert not all(np.allclose(after[h].v, before[tau[h]].v, atol=1e-6) for h in range(4))
