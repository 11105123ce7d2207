"""Shared by benchmarks: every timing is recorded with the environment (threads, load average, CPU)."""

import resource

from forgetbench.env import environment

__all__ = ["environment", "peak_rss_mib"]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
