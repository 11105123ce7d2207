"""Dependency parsers on Universal Dependencies."""
