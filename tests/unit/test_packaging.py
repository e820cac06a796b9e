"""What a package index shows of band-trio, and what pip resolves against.

* every core dependency has a lower bound, and each upper bound (`<`, `<=`, `==`,
  `~=`) is named with its reason in docs/discussion/dependencies.md ("The bounds");
* the MIT licence text ships (`license-files`; the installed metadata carries it);
* the project URLs are there, all under the repository's address;
* every README link is absolute (relative ones break on an index page) and, under the
  repository's address, names a file that exists.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
REPOSITORY = PROJECT["urls"]["Repository"]


def bounds_section() -> str:
    page = (ROOT / "docs" / "discussion" / "dependencies.md").read_text()
    assert "## The bounds" in page, "docs/discussion/dependencies.md has no 'The bounds'"
    return page.split("## The bounds", 1)[1].split("\n## ", 1)[0]


def test_every_core_dependency_has_a_lower_bound_and_each_upper_bound_a_reason() -> None:
    section = bounds_section()
    for line in PROJECT["dependencies"]:
        requirement = Requirement(line)
        operators = {spec.operator for spec in requirement.specifier}
        assert operators & {">=", "==", "~="}, f"{line}: no lower bound"
        assert "==" not in operators or "*" in str(requirement.specifier), f"{line}: an exact pin"
        if operators & {"<", "<=", "==", "~="}:
            assert f"`{line}`" in section, f"{line}: its upper bound has no reason in the page"
        assert f"`{requirement.name}" in section, f"{requirement.name}: not in 'The bounds'"


def test_the_licence_ships() -> None:
    assert PROJECT["license"] == "MIT"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    installed = metadata.distribution("band-trio")
    assert installed.metadata["License-Expression"] == "MIT"
    files = {str(path) for path in installed.files or ()}
    assert any(path.endswith("licenses/LICENSE") for path in files), sorted(files)[:20]


def test_the_project_urls_are_under_the_repository() -> None:
    urls = PROJECT["urls"]
    assert {"Homepage", "Repository", "Documentation", "Changelog", "Issues"} <= set(urls)
    assert REPOSITORY.startswith("https://")
    for name, url in urls.items():
        assert url.startswith(REPOSITORY), f"{name}: {url}"
    for url in (urls["Documentation"], urls["Changelog"]):
        assert (ROOT / url.removeprefix(REPOSITORY).split("/", 3)[-1]).exists(), url


def test_every_readme_link_is_absolute_and_names_a_file_of_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert len(links) > 10
    for link in links:
        assert link.startswith("https://"), f"a relative link breaks on an index page: {link}"
        if link.startswith(f"{REPOSITORY}/"):
            kind, branch, path = link.removeprefix(f"{REPOSITORY}/").split("/", 2)
            assert (kind, branch) in {("blob", "main"), ("tree", "main")}, link
            assert (ROOT / path.split("#")[0]).exists(), f"no {path} in the repository: {link}"
