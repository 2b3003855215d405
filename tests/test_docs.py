"""The manual's code runs: every ```python block of README.md and docs/ is run, each on its own (a fresh
subprocess, PYTHONPATH set to this checkout), and must exit 0. A block whose first line is
`# doc: no-run (<why>)` is skipped, counted and named in the test's output, never silently. Blocks that
define `@triton.jit` kernels need their source in a file (Triton's jit reads it), so every block runs as
a script written to a temporary .py file (`__name__ == "__main__"`). Also: the options page is generated
from OPTIONS, and the JSON reference lists every key of a check's record."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_RUN = re.compile(r"^#\s*doc:\s*no-run\s*\((.+)\)\s*$")
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(files: list[Path]) -> list[tuple[str, str]]:
    """(where, source) of every ```python block: where is `path:line`."""
    found = []
    for f in files:
        text = f.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 2
            name = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f.name
            found.append((f"{name}:{line}", m.group(1)))
    return found


def run_block(where: str, source: str, tmp: Path) -> tuple[str, int, str, float]:
    """Run one block as a script in its own folder (its run directory stays there); (where, rc, output, s)."""
    folder = tmp / re.sub(r"\W", "_", where)
    folder.mkdir()
    script = folder / "block.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TRITON_INTERPRET", "TDIFF_WORKER")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)
    return where, done.returncode, done.stdout + done.stderr, time.monotonic() - start


def test_every_python_block_runs(tmp_path, capsys):
    blocks = python_blocks(doc_files())
    assert len(blocks) >= 5, f"only {len(blocks)} python blocks found: is the pattern right?"
    skipped = [(w, m.group(1)) for w, s in blocks if (m := NO_RUN.match(s.splitlines()[0].strip() if s else ""))]
    to_run = [(w, s) for w, s in blocks if not NO_RUN.match(s.splitlines()[0].strip() if s else "")]
    to_run.sort(key=lambda b: "verify(" not in b[1] or "__main__" not in b[1])  # the slow ones first, side by side
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda b: run_block(b[0], b[1], tmp_path), to_run))
    with capsys.disabled():
        print(f"\ndocs: {len(blocks)} python blocks: {len(to_run)} run, {len(skipped)} skipped (marked no-run)")
        for where, why in skipped:
            print(f"  skipped {where}: {why}")
        for where, rc, _, seconds in results:
            print(f"  ran {where}: exit {rc} in {seconds:.1f} s")
    failed = [f"{where} exited {rc}:\n{out[-3000:]}" for where, rc, out, _ in results if rc != 0]
    assert not failed, "\n\n".join(failed)


def test_a_broken_block_fails(tmp_path):
    """The runner is not blind: a block that raises exits non-zero, and one marked no-run is not run."""
    (tmp_path / "page.md").write_text("```python\nraise SystemExit(3)\n```\n\n```python\n"
                                      "# doc: no-run (needs a GPU)\nraise SystemExit(4)\n```\n")
    blocks = python_blocks([tmp_path / "page.md"])
    assert len(blocks) == 2
    assert NO_RUN.match(blocks[1][1].splitlines()[0]).group(1) == "needs a GPU"
    assert run_block("page", blocks[0][1], tmp_path)[1] == 3


def _hook():
    spec = importlib.util.spec_from_file_location("options_table", ROOT / "docs" / "hooks" / "options_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_options_page_is_generated_from_the_options_table():
    from tdiff import options

    hook = _hook()
    page = (ROOT / "docs" / "reference" / "options.md").read_text()
    assert hook.MARKER in page
    table = hook.on_page_markdown(page, None, None, None)
    assert hook.MARKER not in table
    for o in options.OPTIONS:
        row = next((line for line in table.splitlines() if line.startswith(f"| `{o.flag}`")), None)
        assert row is not None, f"no row for {o.flag}"
        assert f"`{options.ini_key(o.name)}`" in row and o.default.replace("|", r"\|") in row
        if o.words:
            assert "`" + r"\|".join(o.words) + "`" in row
        for old in o.aliases:
            assert f"--tdiff-{old}" in row


def test_the_json_reference_lists_every_key_of_a_check_record():
    import dataclasses

    from tdiff.record.check_record import CheckRecord, DivergenceRecord

    keys = {f.name for cls in (CheckRecord, DivergenceRecord) for f in dataclasses.fields(cls)}
    assert len(keys) > 30, sorted(keys)
    page = (ROOT / "docs" / "reference" / "json.md").read_text()
    missing = sorted(k for k in keys if f"`{k}`" not in page)
    assert not missing, f"docs/reference/json.md does not describe: {missing}"


@pytest.mark.parametrize("doc", ["README.md"])
def test_readme_links_to_docs_resolve(doc):
    text = (ROOT / doc).read_text()
    links = re.findall(r"\]\(((?:docs/|CHANGELOG|FINDINGS|ARCHITECTURE)[^)#]*)", text)
    assert links
    for link in links:
        assert (ROOT / link).exists(), f"{doc} links to {link}, which does not exist"
