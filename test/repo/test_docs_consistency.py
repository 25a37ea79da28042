"""The user-facing documents stay short, generated where they should be, and consistent with the
code: README length and contents, links that resolve, every user variable the code reads
documented (and nothing else), the supported torch_npu range stated as `_version.py` has it,
release notes without journal entries, and no page that speaks of who ran a test or where.
Reads files only: no NPU, no plugin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = [
    README,
    REPO / "CONTRIBUTING.md",
    REPO / "CHANGELOG.md",
    *sorted((REPO / "docs").glob("*.md")),
]
VARIABLE = re.compile(r"\bTORCH_NPU_PINPOOL(?:_[A-Z][A-Z_]*[A-Z])?\b")
# Read by the code but not for users to set, each with where it is described.
INTERNAL = {
    "TORCH_NPU_PINPOOL_AUDIT_DIR": "set by the audit command for the program it runs",
    "TORCH_NPU_PINPOOL_SANITIZE": "sanitized test builds: docs/testing.md",
}
# Phrases about who ran a test, on which machine, or what happened to the run - never about the
# project. A user page states what the project does and what its generated results say.
WHO_RAN = (
    "this machine",
    "our machine",
    "my machine",
    "recorded by hand",
    "transcribed from",
    "previous helper",
    "the helper",
    "another agent",
    "held a lock",
    "held by another",
    "lock was held",
    "this session",
    "not re-run",
    "re-run this",
    "was re-run",
    "rerun on",
    "by hand, not in",
)
USER_PAGES = [*DOCS, REPO / "bench" / "README.md"]


FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", flags=re.S | re.M)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _prose(path: Path) -> str:
    """The file without its fenced code blocks."""
    return FENCE.sub("", _text(path))


def _read_by_code() -> set[str]:
    found: set[str] = set()
    for root in ("csrc", "torch_npu_pinpool", "build_backend"):
        for path in (REPO / root).rglob("*"):
            if path.suffix in (".py", ".cpp", ".h", ".pyi"):
                found |= set(VARIABLE.findall(_text(path)))
    found |= set(VARIABLE.findall(_text(REPO / "setup.py")))
    return found


def _supported() -> tuple[str, str]:
    scope: dict = {}
    exec(_text(REPO / "torch_npu_pinpool" / "_version.py"), scope)
    (a, b), (c, d) = scope["MIN_TORCH_NPU"][:2], scope["MAX_TORCH_NPU"]
    return f"{a}.{b}", f"{c}.{d}"


def test_readme_is_short():
    lines = _text(README).splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; move reference text to docs/"


def test_readme_has_no_hashes_durations_or_counts():
    text = _text(README)
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", w)]
    hashes = [w for w in hashes if re.search(r"[a-f]", w)]
    assert hashes == [], f"commit-hash-like words in README.md: {hashes}"
    seconds = re.findall(r"\b\d+(?:\.\d+)?\s?s\b", text)
    assert seconds == [], f"durations in seconds in README.md: {seconds}"
    counts = re.findall(r"\b\d+ (?:passed|skipped|failed)\b", text)
    assert counts == [], f"test counts in README.md (they belong in docs/test-results.md): {counts}"


def test_readme_keeps_the_commands_and_sections():
    text = _text(README)
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    for needed in ("Use", "Is my program affected?", "Install", "Turning it off", "Contributing"):
        assert needed in headings, f"README.md lost its '## {needed}' section"
    blocks = "\n".join(FENCE.findall(text))
    assert re.search(r"^bash ci/test\.sh$", blocks, flags=re.M), "the test command"
    assert re.search(r"^bash ci/demo\.sh\b", blocks, flags=re.M), "the demo command"
    assert "not yet" in text.split("##")[0] + text.split("## ")[1], "status: no real hardware yet"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", _prose(path), flags=re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc):
    text = _prose(doc)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        where = (doc.parent / path).resolve() if path else doc
        if not where.exists():
            broken.append(target)
        elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
            broken.append(target)
    assert broken == [], f"{doc.name}: links that do not resolve: {broken}"


def test_every_user_variable_is_documented_and_every_documented_one_is_read():
    read = _read_by_code()
    assert set(INTERNAL) <= read, (
        f"INTERNAL lists variables the code no longer reads: {set(INTERNAL) - read}"
    )
    documented = set(VARIABLE.findall(_text(REPO / "docs" / "configuration.md")))
    user = read - set(INTERNAL)
    assert user - documented == set(), (
        f"read by the code, missing from docs/configuration.md: {user - documented}"
    )
    assert documented - user == set(), (
        f"in docs/configuration.md, read by nothing: {documented - user}"
    )
    table = set(VARIABLE.findall(_text(README).split("## Configuration", 1)[1].split("\n## ")[0]))
    assert table == user, f"README's configuration table: {table ^ user}"


def test_the_supported_range_is_stated_once_and_matched():
    low, high = _supported()
    pyproject = _text(REPO / "pyproject.toml")
    description = re.search(r'^description = "(.*)"$', pyproject, flags=re.M).group(1)
    assert f"torch_npu {low}-{high}" in description
    assert f"{low}–{high}" in _text(README)
    scope: dict = {}
    exec(_text(REPO / "torch_npu_pinpool" / "_version.py"), scope)
    assert scope["supported_range"]() in _text(REPO / "docs" / "compatibility.md")
    major, minor = high.split(".")
    stale = f"{major}.{int(minor) - 1}"
    patterns = [
        f"{low}–{stale}",
        f"{low}-{stale}",
        f"{stale}.x",
        f"newer than {stale}",
        f"> {stale} ",
    ]
    for doc in [*DOCS, REPO / "pyproject.toml"]:
        text = _text(doc)
        found = [p for p in patterns if p in text]
        assert found == [], f"{doc.name} states an old supported range: {found}"


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_speaks_of_who_ran_what(page):
    text = _text(page).lower()
    found = [phrase for phrase in WHO_RAN if phrase in text]
    assert found == [], (
        f"{page.relative_to(REPO)} speaks of who ran a test or where ({found}): say what the "
        "project does, and leave results to the generated pages"
    )


def test_changelog_is_release_notes():
    text = _text(REPO / "CHANGELOG.md")
    assert "## 0.1.0 — Unreleased" in text
    for section in ("### Added", "### Fixed", "### Known limitations"):
        assert section in text
    journal = re.findall(r"\bstop \d+\b|\bsession \d+\b|\b\d+(?:\.\d+)? s\b|\bverdict\b", text)
    assert journal == [], f"journal entries in CHANGELOG.md: {journal}"
