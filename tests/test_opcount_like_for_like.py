"""Operation counts beside the Table 1s of Shah, Saha & Dutt (2012) and Lopes (2009), counted on what rtctl runs.

Shah, Saha & Dutt (2012): the module-level DeNOC recursion (:mod:`rtctl.plants.legged.modular`) is run a
second time on operation-counting scalars; Lopes (2009): the generalized-momentum Coriolis matrices
evaluated as the paper prints them. Each count is reproducible (the same on any state) and the counted run
computes the same numbers as the compiled one.
"""
from __future__ import annotations

import numpy as np
import pytest
from rtctl.plants.legged import opcount as legged_count
from rtctl.plants.legged.model import planar_biped, spatial_quadruped
from rtctl.plants.stewart.model import StewartPlatform
from rtctl.plants.stewart.opcount import (
    PAPER_TABLE1,
    ROW_BITS,
    count_coriolis,
    count_paper,
)

# (mul + div, add, sqrt) measured with plants/legged/opcount.py
LEGGED_COUNTS = {
    ("planar_biped", "modules", "floating_inverse"): (1620, 1717, 3),
    ("planar_biped", "links", "floating_inverse"): (1308, 1329, 3),
    ("spatial_quadruped", "modules", "floating_inverse"): (4142, 4393, 6),
    ("spatial_quadruped", "links", "floating_inverse"): (3722, 3745, 6),
    ("planar_biped", "modules", "mass_matrix"): (1047, 1119, 0),
    ("spatial_quadruped", "modules", "mass_matrix"): (2817, 3018, 0),
    # forward dynamics, the block UDU^T (eqs. 28-30, A.4-A.9); paper (209 n + 60) M (201 n + 66) A: 1314 / 1272
    # (biped, n = 6), 2568 / 2478 (quadruped, n = 12)
    ("planar_biped", "modules", "forward"): (1904, 1890, 0),
    ("planar_biped", "links", "forward"): (1446, 1428, 0),
    ("spatial_quadruped", "modules", "forward"): (3876, 3923, 0),
    ("spatial_quadruped", "links", "forward"): (3104, 3127, 0),
}


@pytest.mark.parametrize("key", sorted(LEGGED_COUNTS))
@pytest.mark.slow
def test_legged_counts_are_reproducible_and_count_the_numeric_algorithm(key):
    name, partition, quantity = key
    robot = {"planar_biped": planar_biped, "spatial_quadruped": spatial_quadruped}[name]()
    if partition == "links":
        robot = legged_count.link_partition(robot)
    results = []
    for seed in (1, 2):
        q, v, a, fext = legged_count.random_state(robot, seed)
        c, value = legged_count.count(robot, quantity, q, v, a, fext)
        numeric = legged_count.numeric(robot, quantity, q, v, a, fext)
        np.testing.assert_array_equal(value, numeric)   # same operations in the same order
        results.append((c.mul + c.div, c.add, c.sqrt))
    assert results[0] == results[1] == LEGGED_COUNTS[key]


def test_link_level_recursion_is_linear_in_n_and_the_module_blocks_are_not():
    """Every link its own module (the paper's link-level case): fixed-base ID costs exactly (96 n - 31) M and
    (98 n - 59) A, against the paper's (94 n - 81) M (82 n - 75) A; fixed-base FD (block UDU^T, eqs. 28-30)
    exactly (223 n - 163) M (224 n - 218) A, against the paper's (209 n - 198) M (201 n - 185) A and
    Featherstone's (300 n - 267) M (279 n - 259) A, computing what the compiled kernel computes; one dense
    module of n links (N^i of eq. 5 full) grows faster than linearly."""
    links, forward, block = {}, {}, {}
    for n in range(2, 7):
        chain = legged_count.serial_chain(n)
        q, v, a, fext = legged_count.random_state(chain)
        zero = np.zeros_like(fext)
        per_link = legged_count.link_partition(chain)
        c, _ = legged_count.count(per_link, "inverse", q, v, a, zero)
        links[n] = (c.mul + c.div, c.add)
        c, qdd = legged_count.count(per_link, "forward", q, v, a, zero)
        forward[n] = (c.mul + c.div, c.add, c.sqrt)
        np.testing.assert_array_equal(qdd, legged_count.numeric(per_link, "forward", q, v, a, zero))
        c, _ = legged_count.count(chain, "inverse", q, v, a, zero)
        block[n] = c.mul + c.div
    for n, (mul, add) in links.items():
        assert (mul, add) == (96 * n - 31, 98 * n - 59)
        assert legged_count.paper_counts("fixed_inverse", n) == (94 * n - 81, 82 * n - 75)
        assert forward[n] == (223 * n - 163, 224 * n - 218, 0)
        assert legged_count.paper_counts("fixed_forward", n) == (209 * n - 198, 201 * n - 185)
    second_difference = [block[n + 1] - 2 * block[n] + block[n - 1] for n in range(3, 6)]
    assert all(d > 0 for d in second_difference)


def test_stewart_paper_formulas_compute_the_kernels_coriolis_matrices():
    """Eqs. 28, 46, 58, 68, 76 evaluated as printed give the compiled kernel's V of each body (to 1e-13); the
    counts are state independent and follow Table 1's total rule (platform + 6 x legs)."""
    mech = StewartPlatform()
    first = count_paper(mech)
    x, xd = first["x"], first["xd"]
    for row, V in first["V"].items():
        ref = mech.matrices(x, xd, row, 63 if row == "platform" else 1)[1]
        assert np.abs(V - ref).max() < 1e-13
    rng = np.random.default_rng(3)
    other = count_paper(mech, mech.home + 0.05 * rng.standard_normal(6), rng.standard_normal(6))
    assert other["counts"] == first["counts"]
    c = first["counts"]
    legs = [r for r in ROW_BITS if r != "platform"]
    for j in range(3):
        assert c["total"][j] == c["platform"][j] + 6 * sum(c[r][j] for r in legs)
    assert c["total"][:3] == (5907, 10340, 444)
    # fewer additions and multiplications than Table 1's generalized-momentum total (8708, 18026, 144)
    paper_total = PAPER_TABLE1["generalized_momentum"][-1]
    assert c["total"][0] < paper_total[0] and c["total"][1] < paper_total[1]
    kernel = count_coriolis(mech, x, xd)["counts"]["total"]
    assert kernel[:3] == (6030, 11096, 36)
