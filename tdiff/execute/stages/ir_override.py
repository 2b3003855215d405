"""IR files handed to Triton's `ir_override`: content-hashed copies, and which specialization each belongs to.

The stale-cache trap: Triton keys a compile (in memory and on disk) by its options, and `ir_override` is a
path, so editing a file in place returns the kernel compiled from its old contents. tdiff never passes a
user's path: it passes a copy named by the hash of its contents (`store`), so each edit is a new key.

An IR file is one specialization (dtypes, sizes divisible by 16, constexprs, num_warps...). A file tdiff
writes names its specialization in a trailing comment (`// tdiff: specialization=<id> ...`, `;` for LLVM IR;
a cubin in a `<file>.json` beside it) and matches that specialization exactly. A file without one (from
`TRITON_KERNEL_DUMP`, Triton's cache, or written by hand) is matched by what it shows: the kernel's name, its
argument types and alignment attributes, and for TTIR/TTGIR the tensor shapes and the module's num-warps,
num-ctas and target. Two specializations that differ only in a constexpr no shape shows (a flag) cannot be
told apart that way: pin such a file by exporting it with tdiff.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .support import STAGES

_PIN = re.compile(r"^\s*(?://|;) tdiff: specialization=([0-9a-f]+)\b(.*)$", re.M)


def store_dir() -> Path:
    """Where content-hashed IR files live: $TDIFF_STAGES_DIR, else a per-user folder in the temp dir."""
    env = os.environ.get("TDIFF_STAGES_DIR")
    path = Path(env) if env else Path(tempfile.gettempdir()) / f"tdiff-stages-{os.getuid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def stage_of(path: str | Path) -> str:
    """The stage an IR file replaces, from its extension (`.ttgir` -> ttgir)."""
    ext = Path(path).suffix.lstrip(".")
    if ext not in STAGES:
        raise ValueError(f"{path}: an IR file for ir_override ends in {', '.join('.' + s for s in STAGES)}")
    return ext


def comment(stage: str) -> str:
    return ";" if stage == "llir" else "//"


def pinned(text: str | bytes, spec: str, stage: str, about: str = "") -> str | bytes:
    """`text` with a trailing comment naming its specialization (a cubin is returned as is: see `sidecar`).
    The comment goes last so that no line of the IR moves."""
    if isinstance(text, bytes):
        return text
    about = " ".join(about.split())
    return f"{text.rstrip(chr(10))}\n{comment(stage)} tdiff: specialization={spec} {about}\n"


def pin_of(path: str | Path) -> str | None:
    """The specialization an IR file names (its trailing comment, or a cubin's `<file>.json`), if any."""
    path = Path(path)
    side = path.with_name(path.name + ".json")
    if side.exists():
        return json.loads(side.read_text()).get("specialization")
    if stage_of(path) == "cubin":
        return None
    found = _PIN.findall(path.read_text())
    return found[-1][0] if found else None


def store(content: str | bytes, stage: str, name: str = "kernel", spec: str | None = None) -> Path:
    """Write `content` to a file named by its hash (`<name>-<sha>.<stage>`) and return the path; the same
    content always gives the same path, other content another. A cubin with `spec` gets a `.json` beside it."""
    data = content.encode() if isinstance(content, str) else content
    digest = hashlib.sha256(data).hexdigest()[:20]
    path = store_dir() / f"{re.sub(r'[^A-Za-z0-9_]', '_', name)[:60]}-{digest}.{stage}"
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    if spec is not None and isinstance(content, bytes):
        side = path.with_name(path.name + ".json")
        if not side.exists():
            side.write_text(json.dumps({"specialization": spec}))
    return path


def copy_of(path: str | Path) -> Path:
    """A content-hashed copy of a user's IR file (with its `.json`, for a cubin)."""
    path = Path(path)
    stage = stage_of(path)
    data = path.read_bytes() if stage == "cubin" else path.read_text()
    return store(data, stage, path.stem, pin_of(path) if stage == "cubin" else None)


# ------------------------------------------------------------------ matching a file to a launch

@dataclass(frozen=True)
class Fingerprint:
    """What an IR text shows of its specialization."""

    name: str
    args: tuple[str, ...]
    shapes: frozenset[str] = frozenset()
    module: tuple[str, ...] = ()

    def differences(self, other: Fingerprint) -> list[str]:
        out = []
        if self.name != other.name:
            out.append(f"kernel {self.name} vs {other.name}")
        if self.args != other.args:
            out.append(f"arguments ({', '.join(self.args)}) vs ({', '.join(other.args)})")
        if self.module != other.module:
            out.append(f"module attributes {', '.join(self.module)} vs {', '.join(other.module)}")
        if self.shapes != other.shapes:
            out.append(f"tensor shapes {', '.join(sorted(self.shapes))} vs {', '.join(sorted(other.shapes))}")
        return out


def _strip_locs(text: str) -> str:
    """Remove `loc(...)` (nested parentheses) from MLIR text."""
    out, i = [], 0
    while True:
        j = text.find("loc(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        depth, k = 0, j + 3
        while k < len(text):
            depth += text[k] == "("
            depth -= text[k] == ")"
            k += 1
            if depth == 0:
                break
        i = k


def _split_top(text: str) -> list[str]:
    """Split on commas outside (), <>, {} and []."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts]


def _balanced(text: str, start: int) -> str:
    """The text inside the parentheses that open at `start`."""
    depth = 0
    for k in range(start, len(text)):
        depth += text[k] == "("
        depth -= text[k] == ")"
        if depth == 0:
            return text[start + 1:k]
    return text[start + 1:]


def fingerprint(text: str, stage: str) -> Fingerprint | None:
    """The fingerprint of an IR text of `stage` (None for a cubin, or text it cannot read)."""
    if stage in ("ttir", "ttgir"):
        clean = _strip_locs(text)
        m = re.search(r"tt\.func\s+(?:public\s+)?@(\w+)\s*\(", clean)
        if m is None:
            return None
        args = tuple(re.sub(r"^%[\w.$-]+\s*:\s*", "", a) for a in _split_top(_balanced(clean, m.end() - 1)))
        shapes = frozenset(re.findall(r"tensor<([0-9x]+)x", clean))
        module: tuple[str, ...] = ()
        if stage == "ttgir":
            head = re.search(r"^module attributes \{(.*)\}\s*\{", clean, re.M)
            attrs = _split_top(head.group(1)) if head else []
            module = tuple(sorted(a for a in attrs if re.search(r"num-warps|num-ctas|ttg\.target|threads-per", a)))
        return Fingerprint(m.group(1), args, shapes, module)
    if stage == "llir":
        m = re.search(r"^define\s[^@\n]*@(\w+)\s*\(", text, re.M)
        if m is None:
            return None
        args = tuple(re.sub(r"\s+%[\w.]+$", "", a) for a in _split_top(_balanced(text, m.end() - 1)))
        return Fingerprint(m.group(1), args)
    if stage == "ptx":
        m = re.search(r"\.entry\s+(\w+)\s*\(", text)
        if m is None:
            return None
        params = re.findall(r"\.param\s+([^,\n)]*?)\s+\w+_param_\d+", _balanced(text, m.end() - 1))
        return Fingerprint(m.group(1), tuple(" ".join(p.split()) for p in params))
    return None


@dataclass(frozen=True)
class IrFile:
    """A user's IR file as an opinion: its content-hashed copy, its stage, and what it belongs to."""

    path: Path  # as the user named it
    copy: Path  # the content-hashed copy Triton gets
    stage: str
    pin: str | None  # the specialization it names, if it names one
    fingerprint: Fingerprint | None

    @classmethod
    def load(cls, path: str | Path) -> IrFile:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"compiled[ir=...]: no IR file at {path}")
        stage = stage_of(path)
        pin = pin_of(path)
        if stage == "cubin" and pin is None:
            raise ValueError(f"compiled[ir={path}]: a cubin names no specialization; tdiff's exports write a "
                             f"{path.name}.json beside it (or use the PTX)")
        fp = None if stage == "cubin" else fingerprint(path.read_text(), stage)
        if pin is None and fp is None:
            raise ValueError(f"compiled[ir={path}]: cannot find the kernel's function in this {stage} file")
        return cls(path, copy_of(path), stage, pin, fp)

    def mismatch(self, kernel: object) -> str | None:
        """Why this file is not for the specialization `kernel` (a CompiledKernel from source) was compiled
        for; None when it is."""
        from .toolchain import describe, spec_id

        if self.pin is not None:
            mine = spec_id(kernel)
            return None if mine == self.pin else f"{self.path.name} is pinned to specialization {self.pin}, " \
                                                  f"the launch is {mine}: {describe(kernel)}"
        own = fingerprint(_text(kernel, self.stage), self.stage)
        if own is None or self.fingerprint is None:
            return f"cannot read the {self.stage} of {describe(kernel)}"
        diff = self.fingerprint.differences(own)
        return None if not diff else f"{self.path.name} differs from the launch's {describe(kernel)}: " \
                                     + "; ".join(diff)


def _text(kernel: Any, stage: str) -> str:  # (kernel: Triton's CompiledKernel, untyped)
    asm = kernel.asm
    value = asm[stage]
    return value if isinstance(value, str) else value.decode(errors="replace")
