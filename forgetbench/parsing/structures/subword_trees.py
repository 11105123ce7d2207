"""Word-level UD trees as subword-level trees: what the USL objective of UD-PrLM (docs/METHOD.md §5c) scores, and
the words' first pieces a parser reading a pre-trained encoder pools.

The encoder reads ``<s> p_1 … p_N </s>``; position 0 (``<s>``) stands for the root. Rules:

1. Word w (1-based) occupies the positions ``start(w) … start(w) + n_w − 1``, ``start(1) = 1``,
   ``start(w + 1) = start(w) + n_w``, where n_w ≥ 1 is the number of its pieces.
2. The first piece of w carries w's head and label: head ``0`` where w's head is the root, else
   ``start(head(w))`` (the first piece of the head word); label ``deprel(w)``.
3. Every other piece of w attaches to w's first piece with the label ``SUBWORD`` (``"subword"``), so a
   word's pieces form a flat subtree under its first piece and the tree stays a tree.
4. ``<s>``, ``</s>`` and padding have no head: ``IGNORE`` (−100, not scored) and label ``None``.

A word with no pieces is refused: SentencePiece gives every non-empty word at least one.
"""

from __future__ import annotations

from forgetbench.errors import ForgetbenchError

SUBWORD = "subword"
IGNORE = -100


def first_pieces(pieces_per_word: list[int], where: str = "") -> list[int]:
    """Rule 1: the position of each word's first piece (``<s>`` at 0)."""
    starts, pos = [], 1
    for w, n in enumerate(pieces_per_word, 1):
        if n < 1:
            raise ForgetbenchError(f"{where + ': ' if where else ''}word {w} has no subword pieces")
        starts.append(pos)
        pos += n
    return starts


def subword_tree(pieces_per_word: list[int], heads: list[int], labels: list[str],
                 where: str = "") -> tuple[list[int], list[str | None]]:
    """Rules 1–4: per position of ``<s> pieces </s>``, the head position and the label."""
    if not (len(pieces_per_word) == len(heads) == len(labels)):
        raise ForgetbenchError(f"{where + ': ' if where else ''}{len(pieces_per_word)} words, {len(heads)} heads and "
                               f"{len(labels)} labels")
    starts = first_pieces(pieces_per_word, where)
    out_heads, out_labels = [IGNORE], [None]
    for w, (n, h, lab) in enumerate(zip(pieces_per_word, heads, labels, strict=True), 1):
        if not 0 <= h <= len(heads) or h == w:
            raise ForgetbenchError(f"{where + ': ' if where else ''}word {w} has head {h}")
        out_heads.append(0 if h == 0 else starts[h - 1])
        out_labels.append(lab)
        out_heads += [starts[w - 1]] * (n - 1)
        out_labels += [SUBWORD] * (n - 1)
    return out_heads + [IGNORE], out_labels + [None]
