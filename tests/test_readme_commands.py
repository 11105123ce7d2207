"""Every command of the README's code blocks, run as written in a copy of the repository, so a command that stops
working fails CI, not a reader. Marked ``readme`` (several minutes): the default suite leaves it out, CI runs it
(``python -m pytest -q -m readme``).

- The long commands get the quick option the README's Development section lists beside their names, read from
  that sentence (so the documented options are the ones tested).
- ``pip install`` steps are the environment's (this test runs in it); the tests block is this suite itself.
- On a machine without CUDA, a command naming ``--device cuda`` must be refused in one line saying so (the user's
  ``my-*.yaml`` configs are written for it); with CUDA it runs, or is refused for a GPU count the machine lacks.
- ``plan-devices``'s split must be the one its comment states.
- ``FORGETBENCH_README_TIMES=FILE``: each command's wall time is written there as JSON lines.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest
import torch

from .conftest import REPO

pytestmark = pytest.mark.readme

USER_CONFIG = """name: {name}
model: artifacts/teacher
variants: {{base: null}}
benchmarks: [{{name: flores101, kind: flores101, path: data/flores101}}]
languages: [de]
sentences: 2
"""


def quick_options(text: str) -> dict[str, list[str]]:
    """Command -> quick flags, from the Development section's "`FLAGS` (cmd, cmd)" list."""
    dev = text[text.index("## Development"):]
    dev = dev[: dev.index("\n## ", 5)] if "\n## " in dev[5:] else dev
    dev = " ".join(dev.split())
    out = {}
    for flags, names in re.findall(r"`(--[^`]+)` \(([a-z -]+(?:, [a-z -]+)*)\)", dev):
        for name in names.split(", "):
            out[name.strip()] = shlex.split(flags)
    return out


def readme_commands(text: str) -> list[tuple[list[str], str, str]]:
    """(the block's variable assignments, command, its comment) for every command line of the bash blocks."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        if "python -m pytest" in block:
            continue  # the tests block: this suite
        assigns = []
        for line in block.replace("\\\n", " ").splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cmd, _, comment = line.partition(" #")
            if re.match(r"^\w+=", cmd.strip()):
                assigns.append(cmd.strip())
                continue
            for part in cmd.split("&&"):
                if not part.strip().startswith("pip "):
                    out.append((list(assigns), " ".join(part.split()), comment.strip()))
    return out


def _subcommand(cmd: str) -> str:
    words = shlex.split(cmd.replace("$", ""))
    i = max(k for k, w in enumerate(words) if w in ("forgetbench", "forgetbench.cli")) + 1
    return " ".join(words[i : i + 2]) if words[i] == "parse" else words[i]


def test_quick_options_are_documented_for_every_long_command():
    quick = quick_options((REPO / "README.md").read_text(encoding="utf-8"))
    assert {"sweep", "eval", "distill", "train-mt", "parse train", "parse compress"} <= set(quick), quick


def test_every_readme_command_runs_as_written(tmp_path):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    quick = quick_options(text)
    work = tmp_path / "repo"
    shutil.copytree(REPO, work, ignore=shutil.ignore_patterns(".git", "runs", "*.egg-info", "__pycache__",
                                                              ".pytest_cache", ".ruff_cache", ".venv*"))
    for name in ("my-418M", "my-12B"):
        (work / f"{name}.yaml").write_text(USER_CONFIG.format(name=name))
    env = dict(os.environ, HF_HUB_OFFLINE="1", FORGETBENCH_THREADS="1",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    times, cuda = [], torch.cuda.is_available()
    commands = readme_commands(text)
    assert len(commands) >= 13
    for assigns, cmd, comment in commands:
        run = cmd + " " + " ".join(quick.get(_subcommand(cmd), []))
        run = re.sub(r"^forgetbench ", f"{shlex.quote(sys.executable)} -m forgetbench.cli ", run)
        script = "; ".join([*assigns, run])
        t0 = time.perf_counter()
        p = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=900)
        times.append({"command": cmd, "quick": quick.get(_subcommand(cmd), []), "seconds": round(time.perf_counter() - t0, 1),
                      "rc": p.returncode})
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("forgetbench: error")]
        if "--device cuda" in cmd and not cuda:
            assert p.returncode != 0 and err and "torch sees no CUDA GPU" in err[0], (cmd, p.stderr[-2000:])
        elif "--device cuda" in cmd:
            assert p.returncode == 0 or (err and "GPU" in err[0]), (cmd, p.stderr[-2000:])
        else:
            assert p.returncode == 0, (cmd, p.stdout[-2000:], p.stderr[-3000:])
        if "plan-devices" in cmd and re.search(r"[\d.]+(/[\d.]+)+ GiB", comment):
            sizes = re.search(r"([\d.]+(?:/[\d.]+)+) GiB", comment).group(1).split("/")
            shown = re.findall(r"device \d+:\s+([\d.]+) GiB", p.stdout + p.stderr)
            places = [len(x.partition(".")[2]) for x in sizes]  # the README's precision
            assert sizes == [f"{float(x):.{d}f}" for x, d in zip(shown, places, strict=True)], (cmd, shown)
    if os.environ.get("FORGETBENCH_README_TIMES"):
        with open(os.environ["FORGETBENCH_README_TIMES"], "w", encoding="utf-8") as f:
            f.writelines(json.dumps(t) + "\n" for t in times)
