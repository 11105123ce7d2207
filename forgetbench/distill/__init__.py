"""Distillation: SMaLL-100-style students (deep encoder, shallow decoder, target code on the encoder) from any
M2M-100-architecture teacher, on language-balanced data, with L_ce + α·T²·L_kd (docs/METHOD.md §3)."""
