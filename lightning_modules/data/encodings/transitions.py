"""Generative dependency transition systems: arc-standard, arc-eager and arc-swift (DTG §2, Appendix A).

**Transitions** (``Transition``): ``gen`` (a word), ``left_arc``/``right_arc`` (``[k]`` in arc-swift), ``pop``
(arc-eager) and ``pop_root`` (arc-standard). Words are numbered from 1 as in CoNLL-U; 0 is the root.

**Oracles.** arc-standard is the official DTG code's (``data_scripts/conll_to_dep.py``): GEN while fewer than
two words are on the stack; then LEFTARC if head(s1) = s0, else RIGHTARC if head(s0) = s1 and s0 has no
dependent still to come, else GEN; one final ``pop_root`` attaches the last word to the root. arc-eager and
arc-swift (the paper's generative forms, §2 and Appendix A; the official code has neither) keep the generated
word that is not yet on the stack in a one-word buffer b (a new GEN shifts it) and prefer arcs to GEN to POP:
arc-eager LEFTARC if head(s0) = b, RIGHTARC if head(b) = s0 (b is then shifted), GEN when b has no arc with a
stack word, else POP (s0 already has its head); once every word is generated and attached, POP empties the
stack, ``<ROOT>`` last (Figure 4). arc-swift LEFTARC[k] if head(s_k) = b, RIGHTARC[k] if head(b) = s_k for the
smallest such k (the k-1 words above s_k are popped; they already have heads), else GEN; the sequence ends
when the last word is attached (Figure 5).

Shared by the generative model that encodes these sequences with their attention and the discriminative
dependency proposal parser, which reads the arc-standard oracle with SHIFT for GEN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SYSTEMS = ("standard", "eager", "swift")
LEFT_ARC, RIGHT_ARC, POP, POP_ROOT = "left_arc", "right_arc", "pop", "pop_root"


@dataclass(frozen=True)
class Transition:
    """One transition: ``action`` is ``gen``, ``left_arc``, ``right_arc``, ``pop`` or ``pop_root``; ``k`` is
    arc-swift's reach (None elsewhere)."""

    action: str
    k: int | None = None

    def token(self) -> str:
        """The token string of a non-GEN transition (``left_arc``, ``right_arc[2]``, ``pop``, ``pop_root``)."""
        return self.action if self.k is None else f"{self.action}[{self.k}]"


GEN = Transition("gen")


# -- oracles ---------------------------------------------------------------------------------------------------
def oracle(heads: Sequence[int], system: str = "standard") -> list[Transition]:
    """The transition sequence of a projective tree (``heads`` 1-based, 0 = root); see the module docstring.

    ``ValueError`` when the tree does not reduce (it is not projective); callers check projectivity first
    (``dependency.require_projective``) to say which arc crosses.
    """
    n = len(heads)
    head = {w: h for w, h in enumerate(heads, start=1)}
    if system == "standard":
        out = _standard(head, n)
    elif system == "eager":
        out = _eager(head, n)
    elif system == "swift":
        out = _swift(head, n)
    else:
        raise ValueError(f"system must be one of {SYSTEMS}, not {system!r}")
    if out is None:
        raise ValueError("the tree does not reduce: it is not projective")
    return out


def _standard(head: dict[int, int], n: int) -> list[Transition] | None:
    last_dependent = [0] * (n + 1)
    for d, h in head.items():
        last_dependent[h] = max(last_dependent[h], d)
    stack: list[int] = []
    out: list[Transition] = []
    i = 0
    while True:
        if len(stack) >= 2:
            s1, s0 = stack[-2], stack[-1]
            if head[s1] == s0:
                out.append(Transition(LEFT_ARC))
                del stack[-2]
                continue
            if head[s0] == s1 and last_dependent[s0] <= i:
                out.append(Transition(RIGHT_ARC))
                stack.pop()
                continue
        if i == n:
            break
        i += 1
        stack.append(i)
        out.append(GEN)
    if len(stack) != 1:
        return None
    return [*out, Transition(POP_ROOT)]


def _eager(head: dict[int, int], n: int) -> list[Transition] | None:
    stack, buffer, i, attached = [0], None, 0, 0
    out: list[Transition] = []
    while buffer is not None or i < n:
        if buffer is None:
            i += 1
            buffer = i
            out.append(GEN)
            continue
        s0 = stack[-1]
        if s0 != 0 and head[s0] == buffer:
            out.append(Transition(LEFT_ARC))
            stack.pop()
            attached += 1
        elif head[buffer] == s0:
            out.append(Transition(RIGHT_ARC))
            stack.append(buffer)
            buffer = None
            attached += 1
        elif i < n and not any(head[buffer] == s or (s and head[s] == buffer) for s in stack):
            out.append(GEN)
            stack.append(buffer)
            i += 1
            buffer = i
        elif s0 != 0:
            out.append(Transition(POP))
            stack.pop()
        else:
            return None
    return out + [Transition(POP)] * len(stack) if attached == n else None


def _swift(head: dict[int, int], n: int) -> list[Transition] | None:
    stack, buffer, i, attached = [0], None, 0, 0
    out: list[Transition] = []
    while buffer is not None or i < n:
        if buffer is not None:
            arc = next(((k, s) for k, s in enumerate(reversed(stack), start=1)
                        if head[buffer] == s or (s and head[s] == buffer)), None)
            if arc is not None:
                k, s = arc
                if head[buffer] == s:
                    out.append(Transition(RIGHT_ARC, k))
                    del stack[len(stack) - k + 1:]
                    stack.append(buffer)
                    buffer = None
                else:
                    out.append(Transition(LEFT_ARC, k))
                    del stack[len(stack) - k:]
                attached += 1
                continue
            if i == n:
                return None
            stack.append(buffer)
        i += 1
        buffer = i
        out.append(GEN)
    return out if attached == n else None


def arc_standard_heads(transitions: Sequence[Transition]) -> tuple[int, ...]:
    """Heads (1-based, 0 = root) of a complete arc-standard sequence; ``ValueError`` if it is not one."""
    stack: list[int] = []
    heads: dict[int, int] = {}
    words = 0
    for t in transitions:
        if t.action == "gen":
            words += 1
            stack.append(words)
        elif t.action in (LEFT_ARC, RIGHT_ARC) and len(stack) >= 2:
            s1, s0 = stack[-2], stack[-1]
            dependent, head = (s1, s0) if t.action == LEFT_ARC else (s0, s1)
            heads[dependent] = head
            stack.remove(dependent)
        elif t.action == POP_ROOT and len(stack) == 1:
            heads[stack.pop()] = 0
        else:
            raise ValueError(f"{t.token()} cannot come after {len(heads)} arcs with {len(stack)} words on the stack")
    if stack or not words or len(heads) != words:
        raise ValueError("the transition sequence does not end in a complete tree")
    return tuple(heads[w] for w in range(1, words + 1))
