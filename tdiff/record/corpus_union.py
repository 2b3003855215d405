"""Several corpora as one: their union (what `tdiff replay DIR1 DIR2` and `pytest --tdiff` replay),
merging corpora into one (`tdiff corpus merge`), and moving reviewed entries from the run directory's
corpus into the one under version control (`tdiff corpus promote`).

Entries are content-addressed (`<kernel>/<check->case digest>`, `Entry.key`), so the same case found
on two machines has the same key in both corpora. The union keeps each key once: copies that agree on
everything replaying depends on (`Entry.replay_identity`: kernel, case content, "expect", a known
divergence) are duplicates, of which one is replayed; copies that disagree (one says "expect":
"divergence", the other "pass") are a conflict: reported, and replayed from neither until someone
makes them agree.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorpusError
from .corpus import ENTRY, Entry, all_entries, entries_for


@dataclass
class Conflict:
    """Copies of one corpus entry (the same key) whose contents differ."""

    key: str
    entries: list[Entry]
    differences: list[str]

    def describe(self) -> str:
        where = " and ".join(str(e.path) for e in self.entries)
        return (f"conflict: {where} are copies of corpus entry {self.key} with different contents "
                f"({'; '.join(self.differences)}): make them agree (edit or delete one), then replay or merge again")


@dataclass
class Union:
    """Each entry once (in the order first seen), the duplicates skipped, and the conflicts left out."""

    entries: list[Entry] = field(default_factory=list)
    duplicates: int = 0
    conflicts: list[Conflict] = field(default_factory=list)


def _identity(entry: Entry) -> dict[str, Any]:
    try:
        return entry.replay_identity()
    except CorpusError as exc:
        return {"readable": f"unreadable ({exc})"}


def _differences(copies: list[Entry], identities: list[dict[str, Any]]) -> list[str]:
    first, out = identities[0], []
    for other, ident in zip(copies[1:], identities[1:]):
        for name in sorted(set(first) | set(ident)):
            a, b = first.get(name, "(none)"), ident.get(name, "(none)")
            if a != b:
                what = "the case's inputs" if name == "case" else f'"{name}"'
                out.append(f"{what}: {a!r} in {copies[0].path} vs {b!r} in {other.path}")
    return out


def union(groups: Iterable[Iterable[Entry]]) -> Union:
    """The union of several corpora's entries (each group one corpus, earlier groups first)."""
    by_key: dict[str, list[Entry]] = {}
    for entries in groups:
        for e in entries:  # (a folder named twice, as a corpus and as its kernel's folder, is a duplicate too)
            by_key.setdefault(e.key, []).append(e)
    out = Union()
    for key, copies in by_key.items():
        if len(copies) == 1:
            out.entries.append(copies[0])
            continue
        identities = [_identity(c) for c in copies]
        diffs = _differences(copies, identities)
        if diffs:
            out.conflicts.append(Conflict(key, copies, diffs))
        else:
            out.entries.append(copies[0])
            out.duplicates += len(copies) - 1
    return out


def union_of(paths: Sequence[Path]) -> Union:
    """The union of the entries under each path (a corpus, a kernel's folder or one entry)."""
    return union(all_entries(Path(p)) for p in paths)


def entries_for_check(roots: Sequence[Path], check: Any) -> Union:
    """The union of a check's entries in several corpora (the first is the one new entries go to)."""
    return union(entries_for(Path(r), check) for r in roots)


@dataclass
class MergeReport:
    copied: list[Path] = field(default_factory=list)
    identical: int = 0  # entries already in the destination (or in an earlier source), the same
    conflicts: list[Conflict] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # entries not copied because they cannot be read

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.unreadable

    def describe(self) -> str:
        return (f"{len(self.copied)} copied, {self.identical} already there (identical), "
                f"{len(self.conflicts)} conflict(s), {len(self.unreadable)} unreadable (not copied)")


def merge(sources: Sequence[Path], dest: Path) -> MergeReport:
    """Copy into `dest` every entry of `sources` it lacks; skip those it has (the same); leave conflicts
    and unreadable entries alone and report them. Raises CorpusError if a source does not exist."""
    for s in sources:
        if not Path(s).exists():
            raise CorpusError(f"{s}: no such corpus")
    dest = Path(dest)
    here = all_entries(dest) if dest.exists() else []
    u = union([here, *(all_entries(Path(s)) for s in sources)])
    report = MergeReport(identical=u.duplicates, conflicts=u.conflicts)
    held = {e.path.resolve() for e in here}
    for e in u.entries:
        if e.path.resolve() in held:
            continue
        try:
            e.replay_identity()  # (reads it whole)
        except CorpusError as exc:
            report.unreadable.append(str(exc))
            continue
        report.copied.append(_copy(e, dest))
    return report


def _copy(entry: Entry, dest: Path) -> Path:
    """Copy an entry folder to `dest/<kernel>/<id>`, through a temporary folder renamed into place."""
    folder = dest / entry.path.parent.name
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / entry.path.name
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder))
    try:
        shutil.copytree(entry.path, tmp / "entry")
        os.rename(tmp / "entry", final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


@dataclass
class PromoteReport:
    moved: list[Path] = field(default_factory=list)
    already: list[Path] = field(default_factory=list)  # the same entry was there: the local copy was removed
    conflicts: list[Conflict] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.unreadable

    def describe(self) -> str:
        return (f"{len(self.moved)} moved, {len(self.already)} already there (local copy removed), "
                f"{len(self.conflicts)} conflict(s), {len(self.unreadable)} unreadable (left where they are)")


def promote(paths: Sequence[Path], dest: Path, expect: str | None = None) -> PromoteReport:
    """Move reviewed entries (each path an entry, a kernel's folder of entries or a whole corpus, usually
    under the run directory's corpus) into `dest`, the corpus CI replays; with `expect`, set their
    "expect" ("pass": a regression test; "divergence": a known bug outside the kernel) on the way. An entry
    `dest` already holds the same is not copied again (its local copy goes); one it holds otherwise is a
    conflict, left where it is. Raises CorpusError if a path does not exist or holds no entry."""
    dest = Path(dest)
    report = PromoteReport()
    for p in paths:
        found = all_entries(Path(p)) if Path(p).exists() else None
        if not found:
            raise CorpusError(f"{p}: no corpus entry there")
        for entry in found:
            _promote_one(entry, dest, expect, report)
    return report


def _promote_one(entry: Entry, dest: Path, expect: str | None, report: PromoteReport) -> None:
    try:
        ident = entry.replay_identity()  # (reads it whole)
    except CorpusError as exc:
        report.unreadable.append(str(exc))
        return
    if expect is not None and ident["expect"] != expect:
        ident = {k: v for k, v in ident.items() if k != "divergence"}
        ident["expect"] = expect
        if expect == "divergence":
            d = entry.meta().get("divergence") or {}
            ident["divergence"] = {"kind": d.get("kind"), "targets": sorted(d.get("targets") or [])}
    there = dest / entry.path.parent.name / entry.path.name
    if there.exists() and there.resolve() != entry.path.resolve():
        diffs = _differences([Entry(there), entry], [_identity(Entry(there)), ident])
        if diffs:
            report.conflicts.append(Conflict(entry.key, [Entry(there), entry], diffs))
            return
        shutil.rmtree(entry.path)
        report.already.append(there)
    elif not there.exists():
        report.moved.append(_copy(entry, dest))
        shutil.rmtree(entry.path)
        with contextlib.suppress(OSError):
            entry.path.parent.rmdir()  # (its kernel's folder, once empty)
    if expect is not None:
        _set_expect(there, expect)


def _set_expect(path: Path, expect: str) -> None:
    meta = Entry(path).meta()
    if meta.get("expect", "pass") != expect:
        meta["expect"] = expect
        (path / ENTRY).write_text(json.dumps(meta, indent=2) + "\n")
