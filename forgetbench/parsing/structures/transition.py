"""Arc-standard with SWAP (Nivre 2009) and its static oracles, eager and lazy (Nivre, Kuhlmann & Hall 2009).

A configuration is (stack σ, buffer β, arcs); position 0 is the root, words are 1..n in sentence
order. Start: σ = [0], β = [1 … n]; terminal: β empty and σ = [0].

- ``SHIFT``: move b0 onto the stack (β not empty).
- ``LEFT``: s1 ← s0 (s0 becomes the head of s1), pop s1; s1 is not the root.
- ``RIGHT``: s1 → s0 (s1 becomes the head of s0), pop s0; attaching to the root only when β is
  empty and σ = [0, s0], so every parse has exactly one word under the root.
- ``SWAP``: move s1 back to the front of the buffer; only when 0 < s1 < s0 in sentence order (a
  pair is swapped at most once, so parsing terminates), which lets non-projective trees be built.

Oracles (on a gold tree; priority LEFT, RIGHT, SWAP, SHIFT): LEFT/RIGHT when the arc is gold and
the dependent has all its gold dependents already; SWAP when s0 precedes s1 in the tree's
*projective order* (in-order traversal: left dependents, head, right dependents). The **eager**
oracle swaps as soon as that holds. The **lazy** oracle (ours, the default) also requires that
β is empty or b0 is not in the same *maximal projective component* as s0 (the components left on
the stack when the gold tree is parsed without SWAP): it postpones swaps that a later arc would
make unnecessary, and needs no more swaps than the eager one (counted in the tests on every
shipped training treebank). The G2GTr release used the eager oracle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SHIFT, LEFT, RIGHT, SWAP = 0, 1, 2, 3
TRANSITIONS = ("SHIFT", "LEFT", "RIGHT", "SWAP")


@dataclass
class Configuration:
    n: int
    stack: list[int] = field(default_factory=lambda: [0])
    buffer: list[int] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)  # index d: head of d, -1 = not attached (index 0 unused)
    rels: list[int] = field(default_factory=list)  # label ids, -1 = none

    @classmethod
    def start(cls, n: int) -> Configuration:
        return cls(n, [0], list(range(1, n + 1)), [-1] * (n + 1), [-1] * (n + 1))

    @property
    def terminal(self) -> bool:
        return not self.buffer and self.stack == [0]

    def valid(self, t: int) -> bool:
        s = self.stack
        if t == SHIFT:
            return bool(self.buffer)
        if len(s) < 2:
            return False
        if t == LEFT:
            return s[-2] != 0
        if t == RIGHT:
            return s[-2] != 0 or (not self.buffer and len(s) == 2)
        return 0 < s[-2] < s[-1]  # SWAP

    def apply(self, t: int, rel: int = -1) -> None:
        s = self.stack
        if t == SHIFT:
            s.append(self.buffer.pop(0))
        elif t == LEFT:
            d = s.pop(-2)
            self.heads[d], self.rels[d] = s[-1], rel
        elif t == RIGHT:
            d = s.pop()
            self.heads[d], self.rels[d] = s[-1], rel
        else:
            self.buffer.insert(0, s.pop(-2))


def projective_order(heads: list[int]) -> list[int]:
    """Position of each node 0..n in the in-order traversal of the tree (heads over words 1..n, 0 = root)."""
    n = len(heads)
    deps: list[list[int]] = [[] for _ in range(n + 1)]
    for d, h in enumerate(heads, 1):
        deps[h].append(d)
    order, out = [], [0] * (n + 1)
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:  # iterative in-order: left dependents, the head, right dependents
        v, expanded = stack.pop()
        if expanded:
            order.append(v)
            continue
        left = [d for d in deps[v] if d < v]
        right = [d for d in deps[v] if d > v]
        stack += [(d, False) for d in reversed(right)] + [(v, True)] + [(d, False) for d in reversed(left)]
    for k, v in enumerate(order):
        out[v] = k
    return out


def _complete(c: Configuration, d: int, n_deps: list[int]) -> bool:
    return sum(1 for x in range(1, c.n + 1) if c.heads[x] == d) == n_deps[d]


def projective_components(heads: list[int]) -> list[int]:
    """The maximal projective component (its root's index) of each node 0..n: parse the gold tree with SHIFT,
    LEFT and RIGHT only; what is left on the stack are the components' roots."""
    n = len(heads)
    gold = [-1] + heads
    n_deps = [sum(1 for h in heads if h == v) for v in range(n + 1)]
    c = Configuration.start(n)
    while True:
        t = _arc_transition(c, gold, n_deps)
        if t is None:
            if not c.buffer:
                break
            t = SHIFT
        c.apply(t)
    comp = list(range(n + 1))
    for v in range(n + 1):
        r = v
        while c.heads[r] != -1:
            r = c.heads[r]
        comp[v] = r
    return comp


def _arc_transition(c: Configuration, gold: list[int], n_deps: list[int]) -> int | None:
    s = c.stack
    if len(s) < 2:
        return None
    s0, s1 = s[-1], s[-2]
    if s1 != 0 and gold[s1] == s0 and _complete(c, s1, n_deps):
        return LEFT
    if gold[s0] == s1 and _complete(c, s0, n_deps) and (s1 != 0 or (not c.buffer and len(s) == 2)):
        return RIGHT
    return None


def oracle(heads: list[int], rels: list[int] | None = None, lazy: bool = True) -> list[tuple[int, int]]:
    """The transition sequence [(transition, label id or -1)] that builds the gold tree ``heads`` (words 1..n)."""
    n = len(heads)
    gold = [-1] + heads
    labels = [-1] + (rels if rels is not None else [-1] * n)
    n_deps = [sum(1 for h in heads if h == v) for v in range(n + 1)]
    proj = projective_order(heads)
    comp = projective_components(heads) if lazy else None
    c = Configuration.start(n)
    out = []
    while not c.terminal:
        t = _arc_transition(c, gold, n_deps)
        if t is None:
            s = c.stack
            if len(s) >= 2 and s[-2] != 0 and proj[s[-1]] < proj[s[-2]] and (
                    comp is None or not c.buffer or comp[s[-1]] != comp[c.buffer[0]]):
                t = SWAP
            elif c.buffer:
                t = SHIFT
            else:
                raise ValueError(f"oracle stuck on tree {heads}")
        rel = labels[c.stack[-2]] if t == LEFT else labels[c.stack[-1]] if t == RIGHT else -1
        out.append((t, rel))
        c.apply(t, rel)
    return out


def run(n: int, transitions: list[tuple[int, int]]) -> Configuration:
    """Apply a transition sequence from the start configuration (every transition checked valid)."""
    c = Configuration.start(n)
    for t, r in transitions:
        if not c.valid(t):
            raise ValueError(f"{TRANSITIONS[t]} is not valid in {c}")
        c.apply(t, r)
    return c
