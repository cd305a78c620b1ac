"""The docs site: README.md is the entry, the rest lives in docs/ and builds with MkDocs.

``mkdocs build --strict`` fails on any warning: a link to a page or an anchor that does not exist, a page left
out of ``nav`` in mkdocs.yml. The README's links into docs/ are checked here too (MkDocs does not read it).
"""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")


def test_the_docs_build_strict(tmp_path):
    assert MKDOCS.exists(), f"{MKDOCS} missing: install the dev extra (mkdocs)"
    done = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert (tmp_path / "site" / "index.html").exists()


def test_every_docs_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert pages and all(re.search(rf":\s*{re.escape(p)}\s*$", nav, re.M) for p in pages), pages


def test_the_readme_is_an_entry_whose_links_resolve():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 120
    linked = set()
    for target in re.findall(r"\]\(([^)\s]+)\)", readme):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        assert path and (REPO / path).exists(), f"README links {target}: no such file"
        if anchor:
            page = (REPO / path).read_text(encoding="utf-8")
            headings = [re.sub(r"[^\w\s-]", "", h.lower()).strip().replace(" ", "-")
                        for h in re.findall(r"^#+ (.+)$", page, re.M)]
            assert anchor in headings, f"README links {target}: no such heading"
        linked.add(path)
    # the map of the docs: every page is linked from the README
    assert {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")} - {"docs/index.md"} <= linked


def test_no_user_facing_text_names_an_internal_tracking_number():
    """Help, specs, module headers, docs and benchmark scripts say what a thing is, never "issue 29"."""
    places = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "benchmarks").glob("*.py")]
    for package in ("experiments", "lightning_modules", "analysis"):
        places += [*(REPO / package).rglob("*.py"), *(REPO / package).rglob("*.yaml")]
    named = [f"{path.relative_to(REPO)}:{n}" for path in places
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bissues? #?\d+", line, re.IGNORECASE)]
    assert not named, named
