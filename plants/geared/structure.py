"""The structure of a geared robotic mechanism, sections 2-4 of Chen & Wang (1998), "Dynamics of geared
robotic mechanisms" (the virtual-link method):

* the graph: links are vertices, turning pairs thin edges labelled with their axis, gear pairs heavy edges;
  the carrier of every gear pair is the link both gears turn on, possibly through coaxial links (a path of
  thin edges of one axis label);
* the canonical graph (section 2): a thin edge ``p -L- x`` whose parent edge ``pp -L- p`` has the same label
  is moved to ``pp -L- x`` (coaxial links), until no thin-edged path from the base repeats a label;
* the equivalent open-loop chain (EOLC): the thin path base -> end effector in the canonical graph, its
  primary links ``0..n`` and the secondary links each primary link carries;
* the fundamental-circuit equations q_{j,i} = g_{k,j} q_{k,i} (eq. 9) and the coaxial conditions
  q_{i,k} = q_{i,j} + q_{j,k} (eq. 10), solved for the coefficients ``b[j, k]`` of
  q_{j,i}-dot = sum_k b_{j,k} theta_k-dot (eq. 11) and the structure matrix ``A`` with
  phi-dot = A^T Theta-dot (eq. 12).

:class:`MechanismStructure` derives these from the links, turning pairs and gear pairs alone;
:class:`rtctl.plants.geared.model.GearedMechanism` adds the geometry and the dynamics.
"""
from __future__ import annotations

import numpy as np

from .description import GearedMechanismError


class MechanismStructure:
    """The graph, canonical graph, EOLC and rate coefficients (eqs. 9-12) of a mechanism's ``links``,
    ``turning_pairs`` and ``gear_pairs``, from ``base`` to ``end_effector`` driven at ``inputs``: after
    :meth:`derive_structure`, ``n``, ``primary``, ``secondary``, ``carrier``, ``canonical_edges``,
    ``gear_carrier``, ``circuit_equations``, ``coaxial_conditions``, ``b`` and ``A``."""

    def derive_structure(self):
        self._build_graph()
        self._canonicalise()
        self._eolc()
        self._kinematics()

    def _build_graph(self):
        self.thin = {nm: [] for nm in self.links}    # name -> [(neighbour, label)]
        for tp in self.turning_pairs:
            a, b = tp.links
            for x in (a, b):
                if x not in self.links:
                    raise GearedMechanismError(f"turning pair {a}-{b}: unknown link '{x}'")
            if a == b:
                raise GearedMechanismError(f"turning pair {a}-{b}: a link cannot turn on itself")
            if not isinstance(tp.axis, str) or not tp.axis:
                raise GearedMechanismError(f"turning pair {a}-{b}: axis label must be a non-empty string")
            self.thin[a].append((b, tp.axis))
            self.thin[b].append((a, tp.axis))
        self.ratio = []                               # per gear pair: (a, b, g_{b,a}) so q_{a,i} = g_{b,a} q_{b,i}
        for gp in self.gear_pairs:
            a, b = gp.links
            where = f"gear pair {a}-{b}"
            for x in (a, b):
                if x not in self.links:
                    raise GearedMechanismError(f"{where}: unknown link '{x}'")
            na, nb = (float(t) for t in gp.teeth)
            if not (na > 0 and nb > 0):
                raise GearedMechanismError(f"{where}: tooth numbers must be > 0, got {gp.teeth}")
            if gp.kind == "external":
                sign = -1.0
            elif gp.kind == "internal":
                sign = 1.0
            elif gp.kind == "bevel":
                if gp.sign not in (1, -1):
                    raise GearedMechanismError(f"{where}: a bevel pair needs sign = +1 or -1")
                sign = float(gp.sign)
            else:
                raise GearedMechanismError(f"{where}: kind must be external, internal or bevel, got {gp.kind!r}")
            if gp.sign is not None and gp.kind != "bevel" and float(gp.sign) != sign:
                raise GearedMechanismError(f"{where}: sign {gp.sign} contradicts kind '{gp.kind}'")
            self.ratio.append((a, b, sign * nb / na))
        # Connectivity over thin edges from the base (the thin edges must form a spanning tree).
        seen, stack = {self.base}, [self.base]
        while stack:
            x = stack.pop()
            for y, _ in self.thin[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        missing = [nm for nm in self.links if nm not in seen]
        if missing:
            raise GearedMechanismError(f"link '{missing[0]}' is not connected to the base '{self.base}' by "
                                       "turning pairs (disconnected graph)")
        if len(self.turning_pairs) != len(self.links) - 1:
            raise GearedMechanismError(
                f"{len(self.turning_pairs)} turning pairs for {len(self.links)} links: the thin edges must form a "
                "tree (one turning pair per link besides the base)")

    def _coaxial_set(self, start, label):
        """Links reachable from ``start`` through thin edges all labelled ``label`` (coaxial with it)."""
        seen, stack = {start}, [start]
        while stack:
            x = stack.pop()
            for y, lab in self.thin[x]:
                if lab == label and y not in seen:
                    seen.add(y)
                    stack.append(y)
        return seen

    def _canonicalise(self):
        # Tree from the base (original graph).
        parent, label, order = {self.base: None}, {self.base: None}, [self.base]
        for x in order:
            for y, lab in self.thin[x]:
                if y not in parent:
                    parent[y], label[y] = x, lab
                    order.append(y)
        self.original_parent = dict(parent)
        canon = dict(parent)
        for x in order[1:]:
            p = canon[x]
            while p != self.base and label[p] == label[x]:
                p = canon[p]          # coaxial: x turns on p's parent about the same axis
            canon[x] = p
        # Refuse labels repeated non-consecutively on a path from the base.
        for x in order[1:]:
            labels, y = [], x
            while y != self.base:
                labels.append(label[y])
                y = canon[y]
            if len(set(labels)) != len(labels):
                raise GearedMechanismError(
                    f"link '{x}': axis label '{label[x]}' repeats on its thin-edged path from the base "
                    f"({list(reversed(labels))}) and cannot be canonicalised (the repeated axis is separated by a "
                    "joint about another axis)")
        self.canonical_parent, self.axis_label = canon, label
        self.canonical_edges = [(canon[x], x, label[x]) for x in order[1:]]
        self._order = order
        # Gear-pair carriers: a link both gears turn on (possibly through coaxial links).
        self.gear_carrier = {}
        for a, b, _ in self.ratio:
            # A gear turns about the axis of any of its thin edges: a fixed ring (the base) or a ring that is
            # the carrier's parent (a primary link) meshes about the axis of an edge to a child.
            labels_a = sorted({lab for _, lab in self.thin[a]})
            labels_b = sorted({lab for _, lab in self.thin[b]})
            cand = set()
            for la in labels_a:
                for lb in labels_b:
                    if la != lb:
                        cand |= (self._coaxial_set(a, la) & self._coaxial_set(b, lb)) - {a, b}
            if not cand:
                raise GearedMechanismError(f"gear pair {a}-{b}: no carrier (no link on which both gears turn: "
                                           f"'{a}' turns about axes {labels_a}, '{b}' about {labels_b})")
            # The carrier is the member of the set that is an ancestor of both in the canonical tree.
            anc = [x for x in cand if self._is_ancestor(x, a) or self._is_ancestor(x, b)]
            if len(anc) != 1:
                raise GearedMechanismError(f"gear pair {a}-{b}: carrier is ambiguous among {sorted(cand)}")
            self.gear_carrier[(a, b)] = anc[0]

    def _is_ancestor(self, x, y):
        while y is not None:
            if y == x:
                return True
            y = self.canonical_parent[y]
        return False

    def _eolc(self):
        path, y = [], self.end_effector
        while y is not None:
            path.append(y)
            y = self.canonical_parent[y]
        self.primary = list(reversed(path))
        self.n = len(self.primary) - 1
        if self.n < 1:
            raise GearedMechanismError(f"end effector '{self.end_effector}' is the base")
        idx = {nm: i for i, nm in enumerate(self.primary)}
        self.primary_index = idx
        self.secondary = [nm for nm in self._order if nm not in idx]
        self.carrier, self.secondary_carrier = {}, {}
        for s in self.secondary:
            p = self.canonical_parent[s]
            if p not in idx:
                pp = self.canonical_parent[p]
                if pp not in idx:
                    raise GearedMechanismError(
                        f"secondary link '{s}' turns on '{p}', itself carried by secondary link '{pp}': one level of "
                        "secondary carriers (planets on a planet carrier) is supported")
                self.secondary_carrier[s] = p
                p = pp
            self.carrier[s] = idx[p]
        dof = len(self.links) - 1 - len(self.gear_pairs)
        self.dof = dof
        if dof != len(self.inputs):
            raise GearedMechanismError(f"the mechanism has {dof} dof ({len(self.links)} links, "
                                       f"{len(self.gear_pairs)} gear pairs) but {len(self.inputs)} inputs "
                                       f"{self.inputs}")
        if dof != self.n:
            raise GearedMechanismError(f"the mechanism has {dof} dof but its EOLC {self.primary} has {self.n} joints "
                                       "(joint motions are not independent)")

    def _path_rate(self, i, j, where):
        """Coefficients (over canonical edges) of q_{j,i}-dot for coaxial i, j (eq. 10 along the tree path)."""
        lab = self.axis_label
        anc_j, y = [], j
        while y is not None:
            anc_j.append(y)
            y = self.canonical_parent[y]
        up_i, y = [], i
        while y not in anc_j:
            up_i.append(y)
            y = self.canonical_parent[y]
        top = y
        coef = {}
        labels = set()
        for x in up_i:                 # i up to the common ancestor: subtract
            coef[x] = coef.get(x, 0.0) - 1.0
            labels.add(lab[x])
        y = j
        while y != top:                # j up to the common ancestor: add
            coef[y] = coef.get(y, 0.0) + 1.0
            labels.add(lab[y])
            y = self.canonical_parent[y]
        if len(labels) > 1:
            raise GearedMechanismError(f"{where}: links '{i}' and '{j}' are not coaxial in the canonical graph")
        par = self.canonical_parent
        terms = [f"q_{par[x]},{x}" for x in up_i] + [f"q_{x},{par[x]}" for x in reversed(anc_j[:anc_j.index(top)])]
        return coef, terms

    def _kinematics(self):
        edges = [c for _, c, _ in self.canonical_edges]      # one unknown relative rate per non-base link
        col = {x: k for k, x in enumerate(edges)}
        rows, rhs = [], []
        self.circuit_equations, self.coaxial_conditions = [], []
        self.gear_axis_edge = {}     # gear pair -> (edge of gear a's turning axis, edge of gear b's), on the carrier
        for (a, b, g) in self.ratio:
            i = self.gear_carrier[(a, b)]
            where = f"gear pair {a}-{b}"
            ca, pa = self._path_rate(i, a, where)
            cb, pb = self._path_rate(i, b, where)
            self.gear_axis_edge[(a, b)] = (a if a in ca else next(iter(ca)), b if b in cb else next(iter(cb)))
            row = np.zeros(len(edges))
            for x, v in ca.items():
                row[col[x]] += v
            for x, v in cb.items():
                row[col[x]] -= g * v
            rows.append(row)
            rhs.append(np.zeros(self.n))
            self.circuit_equations.append(f"q_{a},{i} = {g:+.6g} q_{b},{i}   (eq. 9, g_{b},{a} = {g:+.6g})")
            for x, terms in ((a, pa), (b, pb)):
                if len(terms) > 1:
                    self.coaxial_conditions.append(f"q_{x},{i} = " + " + ".join(terms) + "   (eq. 10)")
        for r in range(1, self.n + 1):
            row = np.zeros(len(edges))
            row[col[self.primary[r]]] = 1.0
            rows.append(row)
            e = np.zeros(self.n)
            e[r - 1] = 1.0
            rhs.append(e)
        mat, rhs = np.array(rows), np.array(rhs)
        if mat.shape[0] != mat.shape[1] or np.linalg.matrix_rank(mat) < mat.shape[1]:
            raise GearedMechanismError("the fundamental-circuit equations (eq. 9) do not determine every relative "
                                       "rotation from the joint angles (dependent gear pairs)")
        self.edge_rates = dict(zip(edges, np.linalg.solve(mat, rhs)))   # child -> coefficients over theta-dot
        self.b = {}
        for s in self.secondary:
            b = self.edge_rates[s].copy()
            b[np.abs(b) < 1e-14] = 0.0
            self.b[s] = b
        self.A = np.column_stack([self.edge_rates[m] for m in self.inputs])
        self.A[np.abs(self.A) < 1e-14] = 0.0
        if abs(np.linalg.det(self.A)) < 1e-12:
            raise GearedMechanismError(f"inputs {self.inputs} do not drive every joint (structure matrix A is "
                                       "singular)")
        self.A_inv = np.linalg.inv(self.A)
