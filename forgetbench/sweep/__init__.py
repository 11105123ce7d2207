"""The main command's engine, above ``eval`` and ``compress``: config → run (every pass) → summarise (store only)."""

from forgetbench.sweep.config import SweepConfig, load_sweep
from forgetbench.sweep.run import run_sweep
from forgetbench.sweep.summarise import summarise

__all__ = ["SweepConfig", "load_sweep", "run_sweep", "summarise"]
