"""Sweep results: one row per run in a Parquet file, with a journal that makes sweeps resumable.

While a sweep runs, every finished row is appended to ``RESULTS.journal.jsonl``
(one JSON line, flushed), so an interrupted sweep loses at most the runs in
flight. :meth:`ResultStore.finalize` merges the journal into the Parquet file
(columns ``run_id``, ``index``, ``status``, ``reason``, the metrics and
``param.<section>.<key>``; a per-joint list parameter is stored as its JSON
text) and removes the journal. Parquet keeps the column types, is compact and
is read directly by pandas, polars, DuckDB and Arrow tools.

``rtctl sweep --fresh`` does not delete the earlier results up front:
:meth:`ResultStore.set_aside` renames them to ``RESULTS.previous`` (and
``RESULTS.journal.jsonl.previous``); they are deleted once the new sweep has
written its first row, and put back by :meth:`ResultStore.restore_aside` if it
stops before that. A set-aside left behind by a killed process is sorted out
by :meth:`ResultStore.recover_aside` on the next start.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

COLUMN_ORDER = ("run_id", "index", "status", "reason")


def _plain(value):
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value


def _json_safe(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


class ResultStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.suffix != ".parquet":
            raise ValueError(f"results file must end in .parquet, got {str(path)!r}")
        self.journal = self.path.with_name(self.path.name + ".journal.jsonl")
        self._fh = None
        self._aside: list[tuple[Path, Path]] = []   # (path, where it was moved) by set_aside

    def existing_rows(self) -> list[dict]:
        """Rows already finished: the Parquet file's and the journal's (a torn line is ignored)."""
        rows = read_rows(self.path) if self.path.exists() else []
        if self.journal.exists():
            with open(self.journal, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
        latest = {r["run_id"]: r for r in rows}
        return list(latest.values())

    def _aside_pairs(self) -> list[tuple[Path, Path]]:
        return [(p, p.with_name(p.name + ".previous")) for p in (self.path, self.journal)]

    def set_aside(self) -> None:
        """Move the existing results (file and journal) aside: deleted at the first new row, else restored."""
        for p, aside in self._aside_pairs():
            if p.exists():
                p.replace(aside)
                self._aside.append((p, aside))

    def restore_aside(self) -> bool:
        """Put results moved aside by :meth:`set_aside` back (when no new row was written); True if any was."""
        restored = False
        for p, aside in self._aside:
            if aside.exists() and not p.exists():
                aside.replace(p)
                restored = True
        self._aside = []
        return restored

    def drop_aside(self) -> None:
        for _, aside in self._aside:
            aside.unlink(missing_ok=True)
        self._aside = []

    def recover_aside(self) -> None:
        """Sort out what a killed ``--fresh`` run left aside: put it back if the new run wrote nothing,
        else (the new run had written rows) delete it."""
        pairs = [(p, aside) for p, aside in self._aside_pairs() if aside.exists()]
        if not pairs:
            return
        if self.path.exists() or self.journal.exists():
            for _, aside in pairs:
                aside.unlink(missing_ok=True)
        else:
            for p, aside in pairs:
                aside.replace(p)

    def discard(self) -> None:
        for p in (self.path, self.journal):
            if p.exists():
                p.unlink()

    def append(self, row: dict) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.journal, "a+b")
            if self._fh.tell() > 0:  # a journal ending in a torn line (a killed run): start on a new line
                self._fh.seek(-1, 2)
                if self._fh.read(1) != b"\n":
                    self._fh.write(b"\n")
        line = json.dumps(_json_safe({k: _plain(v) if k.startswith("param.") else v for k, v in row.items()}))
        self._fh.write(line.encode("utf-8") + b"\n")
        self._fh.flush()
        if self._aside:  # the new run has its first result on disk: the results it replaces can go
            self.drop_aside()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def finalize(self, keep_ids=None, metadata: dict | None = None) -> int:
        """Write all rows (of ``keep_ids`` if given) to the Parquet file, sorted by run index; drop the journal."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.close()
        rows = self.existing_rows()
        if keep_ids is not None:
            rows = [r for r in rows if r["run_id"] in keep_ids]
        rows.sort(key=lambda r: r["index"])
        names = list(COLUMN_ORDER)
        for r in rows:
            names += [k for k in r if k not in names]
        columns = {}
        for name in names:
            values = [_plain(r.get(name)) if name.startswith("param.") else r.get(name) for r in rows]
            if all(v is None or isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and \
                    any(isinstance(v, float) for v in values):
                values = [float("nan") if v is None else float(v) for v in values]
            columns[name] = values
        table = pa.table(columns)
        if metadata:
            table = table.replace_schema_metadata({k: json.dumps(v) for k, v in metadata.items()})
        tmp = self.path.with_name(self.path.name + ".tmp")
        pq.write_table(table, tmp)
        tmp.replace(self.path)
        if self.journal.exists():
            self.journal.unlink()
        return len(rows)


def read_metadata(path: str | Path) -> dict:
    """What :meth:`ResultStore.finalize` stored beside the rows (the sweep file, method, parameters, planned
    runs); {} for a file without it."""
    import pyarrow.parquet as pq

    stored = pq.read_schema(path).metadata or {}
    out = {}
    for key, value in stored.items():
        try:
            out[key.decode()] = json.loads(value)
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue        # pyarrow's own schema entry, or not ours
    return out


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a results file as dicts."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return table.to_pylist()


def read_columns(path: str | Path) -> dict[str, list]:
    """The columns of a results file (``{name: values}``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such results file (write one with `rtctl sweep SWEEP.toml --out {path}`)")
    try:
        return pq.read_table(path).to_pydict()
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path}: not a results file written by rtctl sweep ({exc})") from None
