"""The recipes of the user docs, taken from the pages as printed, so a test runs what a
reader copies and the docs cannot drift from what works.

In docs/containers.md, docs/azurite.md, docs/testing.md, docs/lifecycle.md and docs/indexes.md
every fenced block follows a marker line: `<!-- recipe: NAME -->`, a recipe some test runs (it
asks for it here by page and NAME), or `<!-- not run: WHY -->`. test_doc_recipes.py checks that every block has one
and that every recipe is asked for by a test."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO_ROOT

PAGES = ("containers.md", "azurite.md", "testing.md", "lifecycle.md", "indexes.md")
MARKER = re.compile(r"<!-- (recipe|not run): ?(.*?) -->")


@dataclass
class Block:
    page: str
    line: int
    lang: str
    text: str
    kind: str | None  # "recipe", "not run", or None: no marker
    name: str


def blocks(page: str) -> list[Block]:
    lines = (REPO_ROOT / "docs" / page).read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang = lines[i][3:].strip()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            m = MARKER.fullmatch(prev.strip())
            out.append(Block(page, i + 1, lang, "\n".join(lines[i + 1:end]) + "\n",
                             m.group(1) if m else None, m.group(2) if m else ""))
            i = end + 1
        else:
            i += 1
    return out


def recipe(page: str, name: str) -> str:
    """The text of the block marked `<!-- recipe: NAME -->` in docs/PAGE."""
    found = [b for b in blocks(page) if b.kind == "recipe" and b.name == name]
    assert len(found) == 1, f"docs/{page}: {len(found)} blocks marked <!-- recipe: {name} -->"
    return found[0].text


def commands(text: str) -> list[str]:
    """A shell recipe's commands, one a line (comments and blank lines left out)."""
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
