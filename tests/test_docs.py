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


def test_every_input_topic_has_an_example_event_that_publish_accepts() -> None:
    """The examples in docs/events.md, each through the check `fastci publish --topic` runs: a
    model change that would refuse one fails here, not a newcomer's first line."""
    from fastci.producer.lines import check_lines

    text = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    section = text.split("\n## Example events\n", 1)[1].split("\n## ", 1)[0]
    examples = re.findall(r"^### `([^`]+)`\n.*?^```json\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert sorted(topic for topic, _ in examples) == sorted(SYSTEM.input_topics)
    for topic, block in examples:
        lines = [line.encode() for line in block.splitlines()]
        checked = check_lines(lines, topic)
        assert not checked.refused, f"{topic}: {[str(r) for r in checked.refused]}"
        assert len(checked.accepted) == 1 and checked.accepted[0].TOPIC == topic
