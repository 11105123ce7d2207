"""Shared by benchmarks: every timing is recorded with its threads and load average."""

import os
import platform
import resource

import torch


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def environment() -> dict:
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "loadavg_1m": os.getloadavg()[0],
            "cpus": os.cpu_count(), "python": platform.python_version()}
