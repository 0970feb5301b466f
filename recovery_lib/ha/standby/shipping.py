"""State shipping: copies of the primary's checkpoint in the standby's own storage.

A copy is a consistent cut at the primary's last committed batch ``N``: offset and commit log
entries up to ``N``, state store files up to version ``N + 1`` (Spark commits version b+1 in
batch b), the rest of the checkpoint (metadata, source and schema files) and the causal state
next to it (``<checkpoint>.causal``: stream markers and the truncation mark). Logs are listed
before state, so every state file a listed commit needs is already there (the other order can
give ``CANNOT_LOAD_STATE_STORE ... .changelog does not exist`` on restart).

Incremental: checkpoint files are write-once (Spark writes a temp file and renames it; RocksDB
with changelog checkpointing writes a small ``<v>.changelog`` per batch and an occasional
snapshot), so a file with the size and mtime it had in the previous copy is hard-linked from
there, and only new files are copied. A copy is complete once its ``MANIFEST.json`` (size and
CRC-32 of every file) is written, last, by rename; ``shipped.json`` then points at it. A torn
copy (no manifest, a missing or damaged file) is never used: ``latest_complete`` verifies the
checksums and falls back to the previous complete copy.

Layout of a standby directory::

    copies/<seq>/tree/<name>/...        the checkpoint (<name> = the query's directory)
    copies/<seq>/tree/<name>.causal/... its causal state, when there is one
    copies/<seq>/MANIFEST.json
    shipped.json                        the newest complete copy: seq, batch, bytes
    tail/<b>                            the primary's offset-log entries past the copy
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recovery_lib.files import write_atomic
from recovery_lib.runtime.checkpoint import batch_ids, last_committed

MANIFEST = "MANIFEST.json"
SHIPPED = "shipped.json"
_STATE_FILE = re.compile(r"^\.?(\d+)\.(changelog|zip|delta|snapshot)(\.crc)?$")
_LOG_FILE = re.compile(r"^\.?(\d+)(\.crc)?$")
_CHUNK = 1 << 20


@dataclass
class ShippedCopy:
    seq: int
    batch: int
    files: int
    bytes_total: int
    bytes_copied: int  # new bytes this round (the rest was linked from the previous copy)
    primary_batch: int  # the primary's last committed batch when the round ended
    created_ms: int
    path: str = ""

    @property
    def lag_batches(self) -> int:
        return max(0, self.primary_batch - self.batch)


@dataclass
class Lag:
    batches: int
    bytes: int
    shipped_batch: int | None
    primary_batch: int | None


@dataclass
class _Entry:
    size: int
    mtime_ns: int
    crc: int


@dataclass
class Manifest:
    seq: int
    batch: int
    source: str
    created_ms: int
    files: dict[str, _Entry] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "seq": self.seq,
                "batch": self.batch,
                "source": self.source,
                "created_ms": self.created_ms,
                "files": {k: [e.size, e.mtime_ns, e.crc] for k, e in self.files.items()},
            }
        )

    @classmethod
    def load(cls, path: Path) -> Manifest:
        data = json.loads(path.read_text())
        return cls(
            int(data["seq"]),
            int(data["batch"]),
            data["source"],
            int(data["created_ms"]),
            {k: _Entry(*v) for k, v in data["files"].items()},
        )

    @property
    def bytes(self) -> int:
        return sum(e.size for e in self.files.values())


# -- what belongs to a copy ----------------------------------------------------------------------


def _selected(checkpoint: Path, batch: int) -> Iterator[tuple[str, Path]]:
    """(relative name, path) of the files of a cut at ``batch``: logs first, then the rest."""
    name = checkpoint.name
    for log in ("offsets", "commits"):
        directory = checkpoint / log
        if directory.is_dir():
            for path in sorted(directory.iterdir()):
                m = _LOG_FILE.match(path.name)
                if m and int(m.group(1)) <= batch:
                    yield f"{name}/{log}/{path.name}", path
    for root, _dirs, files in os.walk(checkpoint):
        rel_root = Path(root).relative_to(checkpoint)
        if rel_root.parts and rel_root.parts[0] in ("offsets", "commits"):
            continue
        for file in sorted(files):
            if file.endswith(".tmp") or ".tmp." in file:
                continue  # a file Spark is still writing
            m = _STATE_FILE.match(file)
            if m and int(m.group(1)) > batch + 1:
                continue  # state of a batch after the cut
            yield f"{name}/{rel_root / file}", Path(root) / file
    causal = checkpoint.with_name(f"{name}.causal")
    if causal.is_dir():
        for root, _dirs, files in os.walk(causal):
            for file in sorted(files):
                if not file.endswith(".tmp"):
                    path = Path(root) / file
                    yield f"{name}.causal/{path.relative_to(causal)}", path


def _copy_with_crc(src: Path, dst: Path) -> tuple[int, int]:
    crc, size = 0, 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            fout.write(chunk)
    return size, crc


def _crc(path: Path) -> tuple[int, int]:
    crc, size = 0, 0
    with open(path, "rb") as fin:
        while chunk := fin.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


# -- shipping ------------------------------------------------------------------------------------


class Shipper:
    """Ships ``checkpoint`` (a query's checkpoint directory) into ``standby_dir``."""

    def __init__(
        self, checkpoint: str | os.PathLike[str], standby_dir: str | os.PathLike[str], keep: int = 3
    ) -> None:
        self.checkpoint = Path(checkpoint)
        self.dir = Path(standby_dir)
        self.keep = max(1, keep)
        self.copies = self.dir / "copies"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One shipping round at a time (the shipper thread and the CLI/DAG may overlap)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def ship(self) -> ShippedCopy | None:
        """One round: a new complete copy if the primary committed a batch since the last one
        (None when there is nothing new, or nothing committed yet). Also refreshes the tail."""
        with self._locked():
            batch = last_committed(self.checkpoint)
            previous = latest_complete(self.dir, verify=False)
            self._ship_tail(previous.batch if previous is not None else -1)
            if batch is None:
                return None
            if previous is not None and previous.batch >= batch:
                return None
            return self._new_copy(batch, previous)

    def _new_copy(self, batch: int, previous: Manifest | None) -> ShippedCopy:
        seq = (previous.seq + 1) if previous is not None else _next_seq(self.copies)
        seq = max(seq, _next_seq(self.copies))
        target = self.copies / f"{seq:08d}"
        if target.exists():  # a torn copy of an earlier attempt with this number
            shutil.rmtree(target)
        tree = target / "tree"
        prev_tree = self.copies / f"{previous.seq:08d}" / "tree" if previous else None
        manifest = Manifest(seq, batch, str(self.checkpoint), int(time.time() * 1000))
        copied = state_new = 0
        for rel, src in _selected(self.checkpoint, batch):
            try:
                stat = src.stat()
            except FileNotFoundError:
                continue  # deleted by Spark's own cleanup since the listing
            dst = tree / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            old = previous.files.get(rel) if previous else None
            if (
                old is not None
                and prev_tree is not None
                and old.size == stat.st_size
                and old.mtime_ns == stat.st_mtime_ns
                and not rel.startswith(f"{self.checkpoint.name}.causal/")  # rewritten in place
            ):
                try:
                    os.link(prev_tree / rel, dst)
                    manifest.files[rel] = old
                    continue
                except OSError:
                    pass  # fall through to a copy
            try:
                size, crc = _copy_with_crc(src, dst)
            except FileNotFoundError:
                continue
            manifest.files[rel] = _Entry(size, stat.st_mtime_ns, crc)
            copied += size
            if "/state/" in rel:
                state_new += size
        tmp = target / f"{MANIFEST}.tmp"
        tmp.write_text(manifest.to_json())
        os.replace(tmp, target / MANIFEST)  # the copy is complete from here on
        primary_batch = last_committed(self.checkpoint)
        shipped = ShippedCopy(
            seq,
            batch,
            len(manifest.files),
            manifest.bytes,
            copied,
            primary_batch if primary_batch is not None else batch,
            manifest.created_ms,
            str(target),
        )
        _write_json(self.dir / SHIPPED, asdict(shipped))
        self._log_round(shipped, manifest, state_new, previous)
        self._prune(seq)
        return shipped

    def _log_round(
        self, shipped: ShippedCopy, manifest: Manifest, state_new: int, previous: Manifest | None
    ) -> None:
        """One line per round (shipments.jsonl): shipped bytes against the state that changed
        and the whole state, for the shipping benchmark and the dashboard."""
        self._rounds = getattr(self, "_rounds", 0) + 1
        row = {
            "ts_ms": shipped.created_ms,
            "seq": shipped.seq,
            "seq_in_node": self._rounds,
            "batch": shipped.batch,
            "bytes_copied": shipped.bytes_copied,
            "bytes_total": shipped.bytes_total,
            "state_bytes_new": state_new,
            "state_bytes_total": sum(
                e.size for rel, e in manifest.files.items() if "/state/" in rel
            ),
            "interval_s": round((shipped.created_ms - previous.created_ms) / 1000, 2)
            if previous is not None
            else None,
            "batches": shipped.batch - previous.batch if previous is not None else None,
        }
        with open(self.dir / "shipments.jsonl", "a") as handle:
            handle.write(json.dumps(row) + "\n")

    def ship_tail(self) -> int:
        """Only the tail (at takeover, when the primary's storage is still readable)."""
        with self._locked():
            previous = latest_complete(self.dir, verify=False)
            return self._ship_tail(previous.batch if previous is not None else -1)

    def _ship_tail(self, after: int) -> int:
        """The primary's offset-log entries after the newest complete copy (tiny files): a
        standby replays those batches with the primary's exact boundaries (follow.py)."""
        source = self.checkpoint / "offsets"
        tail = self.dir / "tail"
        tail.mkdir(parents=True, exist_ok=True)
        shipped = 0
        for b in batch_ids(source):
            if b <= after:
                continue
            dst = tail / str(b)
            if not dst.exists():
                with contextlib.suppress(FileNotFoundError):
                    tmp = tail / f".{b}.tmp"
                    shutil.copyfile(source / str(b), tmp)
                    os.replace(tmp, dst)
                    shipped += 1
        return shipped

    def _prune(self, newest: int) -> None:
        complete = sorted(
            (int(p.name) for p in self.copies.iterdir() if p.name.isdigit()), reverse=True
        )
        for seq in complete[self.keep :]:
            if seq != newest:
                shutil.rmtree(self.copies / f"{seq:08d}", ignore_errors=True)

    def lag(self) -> Lag:
        """How far the newest complete copy is behind the primary (batches and bytes)."""
        manifest = latest_complete(self.dir, verify=False)
        primary = last_committed(self.checkpoint)
        if primary is None:
            return Lag(0, 0, manifest.batch if manifest else None, None)
        shipped = manifest.files if manifest is not None else {}
        missing = 0
        for rel, path in _selected(self.checkpoint, primary):
            entry = shipped.get(rel)
            with contextlib.suppress(FileNotFoundError):
                stat = path.stat()
                if entry is None or entry.size != stat.st_size:
                    missing += stat.st_size
        behind = primary - manifest.batch if manifest is not None else primary + 1
        return Lag(max(0, behind), missing, manifest.batch if manifest else None, primary)


def _next_seq(copies: Path) -> int:
    if not copies.is_dir():
        return 1
    return max((int(p.name) for p in copies.iterdir() if p.name.isdigit()), default=0) + 1


def _write_json(path: Path, data: dict) -> None:
    write_atomic(path, json.dumps(data))


# -- using a copy --------------------------------------------------------------------------------


def verify_copy(copy_dir: Path) -> list[str]:
    """What is wrong with a copy (empty: complete and intact)."""
    manifest_path = copy_dir / MANIFEST
    if not manifest_path.exists():
        return ["no manifest: the copy was interrupted"]
    try:
        manifest = Manifest.load(manifest_path)
    except (OSError, ValueError, KeyError) as exc:
        return [f"unreadable manifest: {exc}"]
    problems = []
    for rel, entry in manifest.files.items():
        path = copy_dir / "tree" / rel
        try:
            size, crc = _crc(path)
        except FileNotFoundError:
            problems.append(f"{rel}: missing")
            continue
        if (size, crc) != (entry.size, entry.crc):
            problems.append(f"{rel}: size/checksum {size}/{crc} != {entry.size}/{entry.crc}")
    return problems


def latest_complete(
    standby_dir: str | os.PathLike[str],
    verify: bool = True,
    rejected: list[tuple[int, list[str]]] | None = None,
) -> Manifest | None:
    """The newest complete copy's manifest; with ``verify``, damaged copies are skipped (and
    listed in ``rejected``) in favour of the previous complete one."""
    copies = Path(standby_dir) / "copies"
    if not copies.is_dir():
        return None
    for seq in sorted((int(p.name) for p in copies.iterdir() if p.name.isdigit()), reverse=True):
        copy_dir = copies / f"{seq:08d}"
        if verify:
            problems = verify_copy(copy_dir)
            if problems:
                if rejected is not None:
                    rejected.append((seq, problems))
                continue
        elif not (copy_dir / MANIFEST).exists():
            continue
        try:
            return Manifest.load(copy_dir / MANIFEST)
        except (OSError, ValueError, KeyError):
            continue
    return None


def restore(
    standby_dir: str | os.PathLike[str], manifest: Manifest, live_root: str | os.PathLike[str]
) -> Path:
    """Materialise a copy as a live checkpoint root (hard links: Spark writes new files and
    renames, it never changes a file in place). Returns the query's checkpoint directory."""
    tree = Path(standby_dir) / "copies" / f"{manifest.seq:08d}" / "tree"
    live = Path(live_root)
    for rel in manifest.files:
        dst = live / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            dst.unlink()
        if rel.split("/", 1)[0].endswith(".causal"):  # rewritten in place: a private copy
            shutil.copy2(tree / rel, dst)
            continue
        try:
            os.link(tree / rel, dst)
        except OSError:
            shutil.copy2(tree / rel, dst)
    return live / Path(manifest.source).name
