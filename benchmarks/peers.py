"""The tool against the engines' own copy tools, whole processes, in one run (issue 13).

Usage:  python benchmarks/peers.py [--records 1000000] [--runs 3] [--json FILE] [--dir DIR]

One source store per engine (SQLite, LMDB, RocksDB) holds the example workload that
``benchmarks/run.py`` writes (``statemigrate.testing.workload``: ``--records`` events
of ~316 bytes, 200 versioned 2 KB settings, the odd keys). Each job below is a whole
process (a shell pipeline is one ``bash -o pipefail`` process), timed from start to
exit; every figure is the median of ``--runs`` runs, the jobs taken in turn within each
round so that the machine's load falls on all of them alike. The page cache is warm.

- same-engine copies: ``statemigrate convert`` (verified, and ``--no-verify``) against
  ``VACUUM INTO`` and ``sqlite3 SRC .dump | sqlite3 DST``; ``mdb_copy -c`` and
  ``mdb_dump -a | mdb_load``; ``ldb dump | ldb load --bulk_load`` per column family and
  a checkpoint through rocksdict (hard links);
- ``statemigrate checksum`` of each source against the engine tool's own full dump to
  /dev/null (both read every record);
- ``statemigrate --version``: the start-up cost in every statemigrate figure.

After every run, the store a job made is counted table by table (with the drivers, not
the tool) and must hold what the source holds: a peer that produced nothing or too
little stops the run with an error. A peer whose tool is absent is skipped with a note.
The ratio is peer / statemigrate: above 1 the tool is faster. Beside the wall clock,
the CPU seconds (user + system) of each job's processes, also medians: on a machine
shared with other work they move less than the wall clock, though they leave out the
time a job waits for the disk (``mdb_load`` commits and syncs every 100 records).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import results as R
from timing import settle

from statemigrate.registry import get_engine
from statemigrate.testing.workload import write_workload

ROOT = Path(__file__).resolve().parents[1]
PRIVATE = {"__statemigrate__", "alembic_version", "default"}
Counts = dict[str, int]


# --- counting what a store holds, through the drivers ----------------------------------


def count_sqlite(path: Path) -> Counts:
    import apsw

    con = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
    out = {
        n: int(con.execute(f'SELECT count(*) FROM "{n}"').fetchall()[0][0])
        for n in names
        if n not in PRIVATE
    }
    con.close()
    return out


def count_lmdb(path: Path) -> Counts:
    import lmdb

    env = lmdb.open(str(path), subdir=True, readonly=True, lock=False, max_dbs=1024)
    out = {}
    with env.begin() as txn:
        for name, _ in txn.cursor():
            if name.decode() not in PRIVATE:
                db = env.open_db(name, txn=txn, create=False)
                out[name.decode()] = int(txn.stat(db)["entries"])
    env.close()
    return out


def count_rocksdb(path: Path) -> Counts:
    import rocksdict as rd

    o = rd.Options(raw_mode=True)
    names = rd.Rdict.list_cf(str(path), o)
    db = rd.Rdict(
        str(path),
        o,
        column_families={n: o for n in names if n != "default"},
        access_type=rd.AccessType.read_only(),
    )
    out = {}
    for name in names:
        if name not in PRIVATE:
            cf = db.get_column_family(name)
            out[name] = sum(1 for _ in cf.keys())
            del cf
    db.close()
    return out


COUNT: dict[str, Callable[[Path], Counts]] = {
    "sqlite": count_sqlite,
    "lmdb": count_lmdb,
    "rocksdb": count_rocksdb,
}


# --- the jobs --------------------------------------------------------------------------


@dataclass
class Job:
    """One whole process, timed; ``out`` (of engine ``engine``) is counted after each run."""

    name: str
    argv: list[str]
    out: Path | None = None
    engine: str = ""  # the engine of the source it reads and of ``out``; "" checks nothing
    mkdir: bool = False  # the tool wants an existing, empty destination directory
    check: Callable[[str], Counts] | None = None  # counts taken from the job's own output
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # user + system of the job's processes

    def prepare(self) -> None:
        if self.out is None:
            return
        for p in [self.out, *self.out.parent.glob(self.out.name + ".*")]:
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        if self.mkdir:
            self.out.mkdir()

    def run(self, expected: Counts | None, env: dict[str, str] | None = None) -> None:
        self.prepare()
        settle()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run(self.argv, capture_output=True, text=True, check=False, env=env)
        seconds = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
        if res.returncode != 0:
            raise SystemExit(f"{self.name}: exit {res.returncode}\n{res.stderr.strip()[-2000:]}")
        if expected is not None:
            got = self.counts(res.stdout)
            if got != expected:
                raise SystemExit(
                    f"{self.name}: its output holds {got}, the source {expected}: "
                    "not a copy, no figure"
                )
        self.times.append(seconds)
        self.cpu.append(cpu)

    def counts(self, stdout: str) -> Counts:
        """What the job made, table by table (its report's counts for ``check`` jobs)."""
        if self.check is not None:
            return self.check(stdout)
        if self.out is None or not self.out.exists():
            raise SystemExit(f"{self.name}: exit 0 but it made nothing at {self.out}")
        try:
            return COUNT[self.engine](self.out)
        except Exception as e:  # the driver's own error types
            raise SystemExit(f"{self.name}: its output cannot be read: {e!r}") from e

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu)


def shell(script: str) -> list[str]:
    return ["bash", "-o", "pipefail", "-c", script]


def q(p: Path | str) -> str:
    """A path quoted for the shell (the work directory may hold anything)."""
    return "'" + str(p).replace("'", "'\\''") + "'"


def statemigrate_python() -> list[str]:
    """The interpreter the console script runs."""
    script = Path(sys.executable).parent / "statemigrate"
    if script.exists() and (first := script.read_text().splitlines()[0]).startswith("#!"):
        return first[2:].split()
    return [sys.executable]


def statemigrate_argv() -> list[str]:
    """The console script beside this interpreter (no pyenv shim in the timing)."""
    script = Path(sys.executable).parent / "statemigrate"
    return [str(script)] if script.exists() else [sys.executable, "-m", "statemigrate"]


def parse_checksum(stdout: str) -> Counts:
    """The record counts of ``statemigrate checksum``'s report (``table kind count digest``)."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 4:
            out[parts[0]] = int(parts[2])
    return out


def rocksdb_families(path: Path) -> list[str]:
    import rocksdict as rd

    return [n for n in rd.Rdict.list_cf(str(path), rd.Options(raw_mode=True)) if n != "default"]


_VACUUM_APSW = (
    "import apsw, sys; apsw.Connection(sys.argv[1]).execute('VACUUM INTO ?', (sys.argv[2],))"
)
_CHECKPOINT = """
import rocksdict as rd, sys
o = rd.Options(raw_mode=True)
names = rd.Rdict.list_cf(sys.argv[1], o)
db = rd.Rdict(sys.argv[1], o, column_families={n: o for n in names if n != "default"})
rd.Checkpoint(db).create_checkpoint(sys.argv[2])
db.close()
"""


def plan(work: Path, notes: list[str]) -> tuple[list[Job], list[tuple[str, str, str]]]:
    """The jobs, and the table's rows as (job, statemigrate job, peer job)."""
    sm = statemigrate_argv()
    jobs: list[Job] = [Job("statemigrate --version", [*sm, "--version"])]
    rows: list[tuple[str, str, str]] = [("start-up", "statemigrate --version", "")]

    def ours(engine: str, label: str) -> tuple[str, str]:
        src = work / f"src.{engine}"
        verified, fast = f"convert {label}", f"convert --no-verify {label}"
        jobs.append(
            Job(
                verified,
                [*sm, "convert", "--quiet", str(src), str(work / f"sm.{engine}")],
                work / f"sm.{engine}",
                engine,
            )
        )
        jobs.append(
            Job(
                fast,
                [*sm, "convert", "--quiet", "--no-verify", str(src), str(work / f"smf.{engine}")],
                work / f"smf.{engine}",
                engine,
            )
        )
        jobs.append(
            Job(
                f"checksum {label.split()[0]}",
                [*sm, "checksum", str(src)],
                engine=engine,
                check=parse_checksum,
            )
        )
        return verified, fast

    def pair(job: str, mine: tuple[str, str], peer: Job | None, note: str) -> None:
        if peer is None:
            notes.append(f"skipped {job} against {note}")
            return
        jobs.append(peer)
        rows.append((f"{job} (verified)", mine[0], peer.name))
        rows.append((f"{job} `--no-verify`", mine[1], peer.name))

    sqlite3, ldb = shutil.which("sqlite3"), shutil.which("ldb")
    mdb_copy, mdb_dump, mdb_load = (shutil.which(t) for t in ("mdb_copy", "mdb_dump", "mdb_load"))

    # SQLite
    s, mine = work / "src.sqlite", ours("sqlite", "SQLite → SQLite")
    out = work / "vacuum.sqlite"
    vacuum = (
        Job(
            "`VACUUM INTO` (sqlite3 shell)",
            [sqlite3, str(s), f"VACUUM INTO {q(out)}"],
            out,
            "sqlite",
        )
        if sqlite3
        else Job(
            "`VACUUM INTO` (apsw)",
            [sys.executable, "-c", _VACUUM_APSW, str(s), str(out)],
            out,
            "sqlite",
        )
    )
    pair("SQLite → SQLite", mine, vacuum, "")
    out = work / "dump.sqlite"
    pair(
        "SQLite → SQLite",
        mine,
        Job(
            "`sqlite3 .dump | sqlite3`",
            shell(f"sqlite3 {q(s)} .dump | sqlite3 {q(out)}"),
            out,
            "sqlite",
        )
        if sqlite3
        else None,
        "`sqlite3 .dump | sqlite3`: no sqlite3 shell (apt-get install sqlite3)",
    )
    rows.append(("checksum SQLite", "checksum SQLite", "`sqlite3 .dump > /dev/null`"))
    if not sqlite3:
        notes.append("checksum SQLite: no peer (sqlite3 is absent)")
    else:
        jobs.append(Job("`sqlite3 .dump > /dev/null`", shell(f"sqlite3 {q(s)} .dump > /dev/null")))

    # LMDB
    s, mine = work / "src.lmdb", ours("lmdb", "LMDB → LMDB")
    out = work / "copy.lmdb"
    pair(
        "LMDB → LMDB",
        mine,
        Job("`mdb_copy -c`", [mdb_copy, "-c", str(s), str(out)], out, "lmdb", mkdir=True)
        if mdb_copy
        else None,
        "`mdb_copy -c`: no mdb_copy (apt-get install lmdb-utils)",
    )
    out = work / "dump.lmdb"
    pair(
        "LMDB → LMDB",
        mine,
        Job(
            "`mdb_dump -a | mdb_load`",
            shell(f"mdb_dump -a {q(s)} | mdb_load {q(out)}"),
            out,
            "lmdb",
            mkdir=True,
        )
        if mdb_dump and mdb_load
        else None,
        "`mdb_dump | mdb_load`: no mdb_dump/mdb_load (apt-get install lmdb-utils)",
    )
    rows.append(("checksum LMDB", "checksum LMDB", "`mdb_dump -a > /dev/null`"))
    if not mdb_dump:
        notes.append("checksum LMDB: no peer (mdb_dump is absent)")
    else:
        jobs.append(Job("`mdb_dump -a > /dev/null`", shell(f"mdb_dump -a {q(s)} > /dev/null")))

    # RocksDB
    s, mine = work / "src.rocksdb", ours("rocksdb", "RocksDB → RocksDB")
    families = rocksdb_families(s)
    out = work / "ldb.rocksdb"
    script = [f"ldb --db={q(out)} load --create_if_missing < /dev/null > /dev/null"]
    script += [f"ldb --db={q(out)} create_column_family {q(f)} > /dev/null" for f in families]
    script += [
        f"ldb --db={q(s)} --ignore_unknown_options --column_family={q(f)} dump --hex"
        f" | ldb --db={q(out)} --column_family={q(f)} load --hex --bulk_load --disable_wal > /dev/null"
        for f in families
    ]
    pair(
        "RocksDB → RocksDB",
        mine,
        Job("`ldb dump | ldb load --bulk_load`", shell(" && ".join(script)), out, "rocksdb")
        if ldb
        else None,
        "`ldb dump | ldb load`: no ldb (apt-get install rocksdb-tools)",
    )
    # A checkpoint opens its database for writing: it runs on a copy, so the shared
    # source stays as the workload wrote it (the copy is made once, not timed).
    scratch = work / "checkpoint-src.rocksdb"
    if not scratch.exists():
        shutil.copytree(s, scratch)
    out = work / "checkpoint.rocksdb"
    pair(
        "RocksDB → RocksDB",
        mine,
        Job(
            "checkpoint (rocksdict, hard links)",
            [sys.executable, "-c", _CHECKPOINT, str(scratch), str(out)],
            out,
            "rocksdb",
        ),
        "",
    )
    rows.append(
        (
            "checksum RocksDB",
            "checksum RocksDB",
            "`ldb dump > /dev/null` (every column family)",
        )
    )
    if not ldb:
        notes.append("checksum RocksDB: no peer (ldb is absent)")
    else:
        jobs.append(
            Job(
                "`ldb dump > /dev/null` (every column family)",
                shell(
                    " && ".join(
                        f"ldb --db={q(s)} --ignore_unknown_options --column_family={q(f)} dump --hex > /dev/null"
                        for f in families
                    )
                ),
            )
        )
    return jobs, rows


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    ).stdout.strip()


def measured_commit() -> str:
    """HEAD, marked when src/ or rust/ differ from it (the figures then measure that)."""
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + (
        " + uncommitted changes under src/ or rust/"
        if git("status", "--porcelain", "src", "rust")
        else ""
    )


def snapshot(commit: str, work: Path) -> tuple[str, dict[str, str]]:
    """``src/`` of ``commit`` unpacked under ``work``, and an environment that imports it.

    For a tree that others change while the runs go on: every statemigrate process
    then runs that commit's Python code. The native extension is not in git: the one
    built in the tree now is copied beside it (its modification time is reported).
    """
    sha = git("rev-parse", "--short", f"{commit}^{{commit}}")
    if not sha:
        raise SystemExit(f"--at {commit}: no such commit")
    tree = work / f"tree-{sha}"
    if not tree.exists():
        tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", sha, "src"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        for so in (ROOT / "src" / "statemigrate").glob("_native*.so"):
            shutil.copy2(so, tree / "src" / "statemigrate" / so.name)
        # Its bytecode, as `make install` compiles the tree's (start-ups compare alike).
        compileall.compile_dir(str(tree / "src"), quiet=1)
    built = [
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(so.stat().st_mtime))
        for so in (tree / "src" / "statemigrate").glob("_native*.so")
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(tree / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    where = subprocess.run(
        [*statemigrate_python(), "-c", "import statemigrate; print(statemigrate.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    if not Path(where).is_relative_to(tree):
        raise SystemExit(f"--at {commit}: statemigrate is still imported from {where}")
    return f"{sha} (native extension built {', '.join(built) or 'nowhere'})", env


def table(rows: list[dict]) -> str:
    lines = [
        "| job | statemigrate | peer | ratio | CPU s, statemigrate / peer |",
        "|---|---:|---|---:|---:|",
    ]
    for r in rows:
        cpu = f"{r['statemigrate_cpu_seconds']:.2f}"
        if r["peer"]:
            peer = f"{r['peer']} {r['peer_seconds']:.2f} s".replace("|", "\\|")
            ratio = f"{r['ratio']:.2f}"
            cpu += f" / {r['peer_cpu_seconds']:.2f}"
        else:
            peer = ratio = "—"
        lines.append(
            f"| {r['job']} | {r['statemigrate_seconds']:.2f} s | {peer} | {ratio} | {cpu} |"
        )
    return "\n".join(lines)


def results_table(rows: list[dict[str, Any]], command: str, conditions: str) -> R.Table:
    """The rows of :func:`table` as the data file ``results/peers.json``."""
    return R.Table(
        name="peers",
        title="Against the engines' own tools, whole processes",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("job", align="left"),
            R.Column("statemigrate", ".2f", " s"),
            R.Column("peer", align="left"),
            R.Column("peer time", ".2f", " s"),
            R.Column("ratio", ".2f"),
            R.Column("CPU s, statemigrate", ".2f"),
            R.Column("CPU s, peer", ".2f"),
        ],
        rows=[
            [
                r["job"],
                r["statemigrate_seconds"],
                r["peer"] or None,
                r["peer_seconds"],
                r["ratio"],
                r["statemigrate_cpu_seconds"],
                r["peer_cpu_seconds"],
            ]
            for r in rows
        ],
        notes=["Ratio is the peer's time over statemigrate's: above 1 the tool is faster."],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="events in each source")
    ap.add_argument("--runs", type=int, default=3, help="runs of every job (the median is shown)")
    ap.add_argument(
        "--dir", default=None, help="work here and keep the stores (default: a temp dir)"
    )
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument(
        "--at",
        default=None,
        metavar="COMMIT",
        help="run that commit's src/ (unpacked into the work dir) instead of the live tree",
    )
    R.add_argument(ap)
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="sm-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    commit, env = snapshot(args.at, work) if args.at else (measured_commit(), None)
    expected: dict[str, Counts] = {}
    for engine in ("sqlite", "lmdb", "rocksdb"):
        src = work / f"src.{engine}"
        if src.exists() and COUNT[engine](src).get("events") != args.records:
            shutil.rmtree(src) if src.is_dir() else src.unlink()
            shutil.rmtree(work / "checkpoint-src.rocksdb", ignore_errors=True)
        if not src.exists():
            print(f"writing the {engine} source: {args.records:,} events", file=sys.stderr)
            write_workload(get_engine(engine), src, args.records)
        expected[engine] = COUNT[engine](src)
    notes: list[str] = []
    jobs, pairs = plan(work, notes)
    for note in notes:
        print(note, file=sys.stderr)
    load = [os.getloadavg()[0]]
    for i in range(args.runs):
        for job in jobs:
            print(f"run {i + 1}/{args.runs}: {job.name}", file=sys.stderr)
            job.run(expected.get(job.engine), env)
    load.append(os.getloadavg()[0])
    by_name = {j.name: j for j in jobs}
    rows = []
    for label, mine, peer in pairs:
        if peer and peer not in by_name:
            if mine.startswith("convert"):
                continue  # a copy without its peer says nothing; noted above
            peer = ""  # checksum: its own time stays, the absent dump is noted
        ours_s = by_name[mine].median
        peer_s = by_name[peer].median if peer else None
        peer_cpu = by_name[peer].median_cpu if peer else None
        rows.append(
            {
                "job": label,
                "statemigrate": mine,
                "statemigrate_seconds": ours_s,
                "statemigrate_cpu_seconds": by_name[mine].median_cpu,
                "peer": peer,
                "peer_seconds": peer_s,
                "peer_cpu_seconds": peer_cpu,
                "ratio": peer_s / ours_s if peer_s is not None else None,
            }
        )
    records = {e: sum(c.values()) for e, c in expected.items()}
    print(
        f"\n{args.records:,} events per source ({', '.join(f'{e} {n:,} records' for e, n in records.items())}), "
        f"medians of {args.runs}, whole processes, commit {commit}, load average {load[0]:.1f} "
        f"before and {load[1]:.1f} after; ratio = peer / statemigrate\n"
    )
    print(table(rows))
    conditions = (
        f"{args.records:,} events per source, medians of {args.runs}; {os.cpu_count()} cores, "
        f"load average {load[0]:.1f} before and {load[1]:.1f} after"
    )
    R.write_from(results_table(rows, R.command_line("peers.py", sys.argv[1:]), conditions), args)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "events": args.records,
                    "records": records,
                    "runs": args.runs,
                    "commit": commit,
                    "load_average": load,
                    "rows": rows,
                    "timings": {j.name: j.times for j in jobs},
                    "cpu_seconds": {j.name: j.cpu for j in jobs},
                    "skipped": notes,
                },
                indent=2,
            )
            + "\n"
        )
    if not args.dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
