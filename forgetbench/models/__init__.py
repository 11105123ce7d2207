"""Loading, tokenizers, device maps and checkpoint conversion."""
