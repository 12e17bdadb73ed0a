"""The documentation: a small README, links that resolve, and the processor order as the code has it."""

from __future__ import annotations

import re
from pathlib import Path

from fastci.topology import SYSTEM

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_a_front_door() -> None:
    assert (ROOT / "README.md").stat().st_size <= 20_000


def test_relative_links_resolve() -> None:
    broken = []
    for page in _pages():
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            if target.startswith(("http:", "https:", "mailto:")) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_documented_processor_order_is_the_system_order() -> None:
    text = (ROOT / "docs" / "topology.md").read_text(encoding="utf-8")
    section = text.split("\n## Processor order\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\d+\.\s+`([^`]+)`\s*$", section, re.MULTILINE)
    assert tuple(listed) == SYSTEM.order
