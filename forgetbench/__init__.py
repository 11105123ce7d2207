"""forgetbench: who pays when a multilingual model is compressed or distilled."""

__version__ = "0.1.0"
