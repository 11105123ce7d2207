"""Print the command of one of README.md's marked code blocks: the block right after ``<!-- ci: NAME -->``.

CI runs what this prints, so the README's commands and CI's cannot drift apart. Exit 2 with one line when
the marker or its block is missing (a README edit that drops it fails CI, never silently skips a command).
"""

import re
import sys
from pathlib import Path


def block(readme: str, name: str) -> str:
    m = re.search(rf"^<!-- ci: {re.escape(name)} -->\n```(?:bash|sh)?\n(.*?)^```", readme, re.M | re.S)
    if not m:
        raise SystemExit(f"readme_block: README.md has no ```bash block right after '<!-- ci: {name} -->'")
    return m.group(1).strip()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: readme_block.py NAME")
    print(block((Path(__file__).resolve().parents[1] / "README.md").read_text(), sys.argv[1]))
