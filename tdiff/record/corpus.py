"""The corpus: saved failing cases, replayed on every later run so a fixed bug stays fixed.

Layout: `corpus/<kernel>/<case-id>/entry.json` (kernel identity, the case's description,
backends, verdict, versions, date; format-versioned) and `tensors.npz` (the storages; loaded
without pickle). Entries are written to a temporary folder and renamed into place, so parallel
writers never collide; the case id is a content hash, so the same case is stored once.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core import case as case_mod
from ..core.backend_spec import Role, role_of
from ..core.case import Case
from ..errors import CorpusError
from ..judge.evidence import Evidence
from ..judge.verdict import Verdict

FORMAT = 1
ENTRY = "entry.json"
TENSORS = "tensors.npz"


def _versions() -> dict[str, str]:
    import platform

    import torch
    import triton

    return {"triton": triton.__version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def triton_here() -> str:
    """This process's Triton version (tdiff's workers share its environment)."""
    import triton

    return str(triton.__version__)


def other_triton(meta: dict[str, Any]) -> str | None:
    """`triton X` when an entry was recorded under another Triton than this process's, else None (also for
    entries that recorded no version)."""
    recorded = (meta.get("versions") or {}).get("triton")
    if not recorded or recorded == triton_here():
        return None
    return f"triton {recorded}"


def expected(meta: dict[str, Any]) -> str:
    """What replaying an entry must show here: "divergence" or "pass". An entry with `"expect": "divergence"`
    and `"expect_triton"` (a version specifier, e.g. "<3.9": the Tritons with the bug) expects its divergence
    only under those; under a Triton that fixed the bug it is a regression test ("pass")."""
    expect = str(meta.get("expect", "pass"))
    spec = meta.get("expect_triton")
    if expect != "divergence" or not spec:
        return expect
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    try:
        within = Version(triton_here()) in SpecifierSet(str(spec), prereleases=True)
    except InvalidSpecifier:
        raise CorpusError(f"\"expect_triton\": {spec!r} is not a version specifier (e.g. \"<3.9\")") from None
    return "divergence" if within else "pass"


def _rel(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        rel = os.path.relpath(path)
        return path if rel.startswith("..") else rel
    except ValueError:  # pragma: no cover
        return path


def case_folder(check: Any, case: Case) -> Path:
    """Where a check's case is kept, under a corpus or reproducer root: `<kernel>/<case id>`, with the
    check's name before the id when it is not the default one."""
    name = case.digest() if check.name == "tdiff" else f"{check.name}-{case.digest()}"
    return Path(check.kernel_name) / name


def recorded_sides(meta: dict[str, Any]) -> tuple[Role, ...]:
    """The sides of the divergence an entry recorded (`divergence.pair`, stored as labels), read back as roles:
    the corpus's one read of a stored label."""
    return tuple(role_of(label) for label in (meta.get("divergence") or {}).get("pair") or ())


def write(root: Path, check: Any, case: Case, verdict: Verdict, ev: Evidence) -> Path:
    """Save a failing case under `root/<kernel>/<case-id>/`; returns the entry folder."""
    meta, arrays = case_mod.to_json(case)
    outcomes = list(ev.outcomes.values())
    entry = {
        "format": FORMAT,
        "kernel": {"id": check.id, "module": check.module, "file": _rel(check.file), "name": check.kernel_name,
                   "check": check.name},
        "case": meta,
        "backends": list(ev.outcomes),
        "verdict": verdict.label,
        "divergence": {"kind": verdict.kind, "targets": list(verdict.targets), "pair": list(verdict.pair or ())},
        "reasons": verdict.reasons[:4],
        "device": next((o.device for o in outcomes if o.device), ""),
        "versions": _versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "expect": "pass",
    }
    final = Path(root) / case_folder(check, case)
    folder = final.parent
    if final.exists():
        return final
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder))
    try:
        np.savez(tmp / TENSORS, **arrays)  # type: ignore[arg-type]  # numpy's stubs let **kwds feed allow_pickle
        (tmp / ENTRY).write_text(json.dumps(entry, indent=2) + "\n")
        try:
            os.rename(tmp, final)
        except OSError:  # another worker wrote the same case first
            if not final.exists():
                raise
    finally:
        if tmp.exists():
            for p in tmp.iterdir():
                p.unlink()
            tmp.rmdir()
    return final


@dataclass
class Entry:
    """One corpus entry on disk; reading it can fail with a `CorpusError` naming the file."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def key(self) -> str:
        """The entry's place in any corpus, `<kernel>/<id>`: copies of one entry in several corpora share it."""
        return f"{self.path.parent.name}/{self.path.name}"

    def replay_identity(self) -> dict[str, Any]:
        """What replaying the entry depends on: the kernel, the case's content, what is expected of it, and
        for a known divergence the divergence it must still show. The rest (versions, device, date, the
        verdict's words) is history, and may differ between copies of one entry found on two machines."""
        meta = self.meta()
        k = meta["kernel"]
        expect = meta.get("expect", "pass")
        out: dict[str, Any] = {"kernel": f"{k.get('module')}::{k.get('name')}[{k.get('check', 'tdiff')}]",
                     "case": self.load_case().digest(), "expect": expect}
        if expect == "divergence":
            d = meta.get("divergence") or {}
            out["divergence"] = {"kind": d.get("kind"), "targets": sorted(d.get("targets") or [])}
            if meta.get("expect_triton"):
                out["expect_triton"] = str(meta["expect_triton"])
        return out

    def expected(self) -> str:
        """"divergence" or "pass": what replaying the entry must show under this run's Triton (`expected`)."""
        try:
            return expected(self.meta())
        except CorpusError as exc:
            raise CorpusError(f"corpus entry {self.path}: {exc}") from None

    def meta(self) -> dict[str, Any]:
        f = self.path / ENTRY
        try:
            meta = json.loads(f.read_text())
        except FileNotFoundError:
            raise CorpusError(f"corpus entry {self.path}: {ENTRY} is missing") from None
        except (OSError, ValueError) as exc:
            raise CorpusError(f"corpus entry {self.path}: {ENTRY} is not valid JSON ({exc})") from None
        if not isinstance(meta, dict) or "case" not in meta or "kernel" not in meta:
            raise CorpusError(f"corpus entry {self.path}: {ENTRY} lacks its 'kernel' or 'case' section")
        if meta.get("format") != FORMAT:
            raise CorpusError(f"corpus entry {self.path}: format {meta.get('format')!r} is not supported "
                              f"(this tdiff reads format {FORMAT})")
        return meta

    def belongs_to(self, check: Any) -> bool:
        try:
            k = self.meta()["kernel"]
        except CorpusError:
            return True  # unreadable entries in a kernel's folder are reported by that kernel's checks
        return bool(k.get("name") == check.kernel_name and k.get("check", "tdiff") == check.name
                and k.get("module", check.module) == check.module)

    def load_case(self, check: Any = None) -> Case:
        meta = self.meta()
        try:
            with np.load(self.path / TENSORS, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise CorpusError(f"corpus entry {self.path}: {TENSORS} is missing") from None
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise CorpusError(f"corpus entry {self.path}: {TENSORS} cannot be read ({exc})") from None
        try:
            case = case_mod.from_json(meta["case"], arrays)
        except (KeyError, ValueError, TypeError) as exc:
            raise CorpusError(f"corpus entry {self.path}: the case cannot be rebuilt ({exc})") from None
        if check is not None and check.inputs is None:
            want, have = set(check.input_names()), set(case.inputs)
            if want != have:
                raise CorpusError(
                    f"corpus entry {self.path}: its inputs {sorted(have)} no longer match the check's inputs "
                    f"{sorted(want)}; update or delete the entry")
        return case


def entries_for(root: Path, check: Any) -> list[Entry]:
    """The entries saved for a check (and unreadable entries in its kernel's folder)."""
    folder = Path(root) / check.kernel_name
    if not folder.is_dir():
        return []
    # an empty folder is no entry (a sync or checkout that removed one can leave it behind)
    out = [Entry(p) for p in sorted(folder.iterdir())
           if p.is_dir() and not p.name.startswith(".") and any(p.iterdir())]
    return [e for e in out if e.belongs_to(check)]


def all_entries(root: Path) -> list[Entry]:
    root = Path(root)
    if (root / ENTRY).exists():
        return [Entry(root)]
    return [Entry(p.parent) for p in sorted(root.rglob(ENTRY)) if not p.parent.name.startswith(".")]
