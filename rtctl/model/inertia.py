"""Physically inconsistent inertias as real URDF files have them, and what loading does about them.

A rotational inertia about the centre of mass is *physically consistent* when
some mass distribution has it: its principal moments are >= 0 and satisfy the
triangle inequalities ``l1 + l2 >= l3``. Equivalently the second moments
``s_k = (l1 + l2 + l3) / 2 - l_k`` are all >= 0, i.e. the principal moments are
``l = A s`` with ``A = ones(3, 3) - eye(3)`` and ``s >= 0``.

Every test is relative to the link's own inertia scale (its largest principal
moment in magnitude): a violation up to :data:`RELATIVE_TOLERANCE` of it is the
round-off of numbers written with about six significant digits (``-1e-20`` on a
diagonal of ``1e-3`` terms, a flat plate's ``l3 = l1 + l2``) and passes
unchanged. A larger violation is a *finding*; the loader's ``inertia`` policy
decides what happens to the findings of a file:

* ``"strict"``: refuse the file, listing every offending link.
* ``"warn"`` (the default): keep the inertias as written -- the model then has
  the dynamics every other URDF reader (Pinocchio, urdfdom) computes -- and
  emit one :class:`InertiaWarning` listing every offending link and by how much.
* ``"repair"``: replace each offending inertia by the nearest physically
  consistent one (Frobenius norm: same principal axes, principal moments
  projected onto the consistent cone) and report each change in one warning.
  MuJoCo's ``balanceinertia`` repairs the triangle inequality too, by setting
  the three moments to their mean; the projection here moves them least.

Massless links carrying an inertia (a common way to write a rotor or a sensor)
are not findings: the spatial inertia ``[[I, 0], [0, 0]]`` is what Pinocchio
uses, and fixed-joint merging keeps it.
"""
from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..options import show
from .body import RELATIVE_TOLERANCE, ModelError, format_moments, inertia_violation  # noqa: F401

INERTIA_POLICIES = ("strict", "warn", "repair")
DEFAULT_INERTIA_POLICY = "warn"

_SECOND_MOMENTS_TO_PRINCIPAL = np.ones((3, 3)) - np.eye(3)


class InertiaWarning(UserWarning):
    """A loaded file has physically inconsistent inertias (kept as written, or repaired)."""


@dataclass(frozen=True)
class InertiaFinding:
    """One link whose inertia is physically inconsistent beyond the relative tolerance."""

    link: str
    problem: str
    amount: float
    moments: tuple
    repaired: np.ndarray | None = field(default=None, compare=False)

    def describe(self) -> str:
        text = f"link {show(self.link)}: {self.problem}"
        if self.repaired is not None:
            new = np.linalg.eigvalsh(self.repaired)
            text += f"; repaired to principal moments {format_moments(new)}"
        return text


def nearest_physical_inertia(inertia: np.ndarray) -> np.ndarray:
    """The physically consistent inertia nearest to a symmetric ``inertia`` in the Frobenius norm.

    The consistent set is convex and invariant under rotations and permutations
    of the principal moments, so the nearest point keeps the principal axes and
    projects the moments onto the cone ``{A s : s >= 0}`` (non-negative least
    squares in three unknowns, solved exactly over the supports of ``s``).
    """
    moments, axes = np.linalg.eigh(inertia)
    projected = _project_onto_consistent_moments(moments)
    repaired = axes @ np.diag(projected) @ axes.T
    return 0.5 * (repaired + repaired.T)


def _project_onto_consistent_moments(moments: np.ndarray) -> np.ndarray:
    best, best_residual = np.zeros(3), float(moments @ moments)
    for size in (1, 2, 3):
        for support in itertools.combinations(range(3), size):
            columns = _SECOND_MOMENTS_TO_PRINCIPAL[:, support]
            second, *_ = np.linalg.lstsq(columns, moments, rcond=None)
            if np.any(second < 0):
                continue
            candidate = columns @ second
            residual = float((candidate - moments) @ (candidate - moments))
            if residual < best_residual:
                best, best_residual = candidate, residual
    return best


class InertiaPolicy:
    """Collects the findings of one file under a policy; ``finish`` raises, warns or does nothing."""

    def __init__(self, policy: str, label: str):
        if policy not in INERTIA_POLICIES:
            raise ModelError(f"inertia must be one of {INERTIA_POLICIES}, got {policy!r}")
        self.policy = policy
        self.label = label
        self.findings: list[InertiaFinding] = []

    def inspect(self, link: str, inertia: np.ndarray) -> np.ndarray:
        """The inertia to use for ``link``: ``inertia`` itself, or its repair under the "repair" policy."""
        violation = inertia_violation(inertia)
        if violation is None:
            return inertia
        problem, amount = violation
        moments = tuple(float(x) for x in np.linalg.eigvalsh(inertia))
        repaired = nearest_physical_inertia(inertia) if self.policy == "repair" else None
        self.findings.append(InertiaFinding(link, problem, float(amount), moments, repaired))
        return inertia if repaired is None else repaired

    def finish(self) -> None:
        if not self.findings:
            return
        listing = "".join(f"\n  {f.describe()}" for f in self.findings)
        count = f"{len(self.findings)} link{'s' if len(self.findings) > 1 else ''}"
        if self.policy == "strict":
            raise ModelError(f"{self.label}: {count} with a physically inconsistent inertia (inertia='strict'; "
                             f"'warn' loads them as written, 'repair' fixes them):{listing}")
        if self.policy == "warn":
            message = (f"{self.label}: {count} with a physically inconsistent inertia, kept as written "
                       f"(inertia='warn'; 'repair' replaces each by the nearest consistent inertia, "
                       f"'strict' refuses):{listing}")
        else:
            message = (f"{self.label}: repaired the inertia of {count} to the nearest physically consistent "
                       f"inertia (inertia='repair'):{listing}")
        warnings.warn(message, InertiaWarning, stacklevel=4)
