"""Same-engine converts (SQLite, LMDB, RocksDB, redb) against the engines' own copies, in one run (issue 13).

Usage:  python benchmarks/bench_native_copy.py [--n 1000000] [--runs 3]
            [--engines sqlite,lmdb,rocksdb,redb,redb-2to3,redb-2to3-respelt] [--dir DIR]
            [--json FILE]

One source store per engine holds the example workload (``--n`` events of ~316 bytes,
200 settings, the odd keys; ``statemigrate.testing.workload``). Each job is a whole
process timed from start to exit, except the in-process copies through the drivers'
APIs; every figure is the median of ``--runs`` rounds, the jobs taken in turn within
a round so that the machine's load falls on all of them alike. The page cache is warm.

Jobs per engine: ``statemigrate convert`` verified and ``--no-verify`` (the native
path), the same convert forced through the batch loop (``--tables`` naming every
table: the path a same-engine convert took before), the engine's command-line copy
(``sqlite3 SRC "VACUUM INTO 'DST'"``; ``mdb_copy -c``; ``ldb checkpoint``, hard links;
``cp`` for redb, which has no command-line tool), its API copy in this process (apsw's
backup API and ``VACUUM INTO``; py-lmdb's ``env.copy(compact=True)``; rocksdict's
``Checkpoint``, hard links, and the same with each link then replaced by a copy, as the
convert does; for redb the file copy then opened and closed by redb, and for
``redb-2to3`` upgraded by redb 2.6's own ``Database::upgrade``), the two
digest scans (``statemigrate checksum`` of the source and of the copy) and
``statemigrate --version`` (start-up). Each job's CPU seconds (user and system, its
child processes included) are reported beside its wall time: on a shared machine they
move far less with the load.

``redb-2to3`` is a format-2 file (redb 2.6) of the events and odd keys alone, converted
with ``--redb-format 3``: the versioned settings would keep the batch path, whose
format 3 spells their value type anew where ``Database::upgrade`` keeps redb 2.x's.
``redb-2to3-respelt`` is the whole workload in format 2, settings included: its convert
with ``--redb-format 3`` is the batch loop (redb 4.x writes every table, its versioned
value type spelt as redb 4.x spells it), timed against the file copied (``cp``, which
keeps the source's holes, or Python's copy) and upgraded by ``Database::upgrade``.

The issue's bounds, reported as ratios (at most 1.00 meets them):

- verified: convert <= 1.2 x (the fastest native copy + the slower digest scan);
- ``--no-verify``: convert <= 1.2 x (the command-line copy + start-up);
- ``redb-2to3-respelt`` (issue 31, decision 6): the verified convert <= 2.5 x (the
  fastest copy + ``Database::upgrade``).
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any

import results as R
from timing import settle

from statemigrate.registry import get_engine
from statemigrate.testing.workload import write_workload

STATEMIGRATE = [sys.executable, "-m", "statemigrate"]
CONVERT_ARGS = {"redb-2to3": ["--redb-format", "3"], "redb-2to3-respelt": ["--redb-format", "3"]}
RESPELT_BOUND = 2.5


def remove(path: Path) -> None:
    """Remove a store (file or directory) and its side files, if there."""
    for p in [path, *path.parent.glob(path.name + "[.-]*")]:
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}")


def sqlite_api_copy(src: Path, dst: Path, how: str) -> None:
    """apsw: the backup API (inside a read transaction) or ``VACUUM INTO``."""
    import apsw

    uri = f"file:{src}?mode=ro"
    conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        if how == "vacuum":
            conn.execute("VACUUM INTO ?", (str(dst),))
            return
        out = apsw.Connection(str(dst))
        with out.backup("main", conn, "main") as backup:
            while not backup.done:
                backup.step(4096)
        out.close()
    finally:
        conn.close()


def lmdb_api_copy(src: Path, dst: Path) -> None:
    """py-lmdb: ``env.copy(compact=True)`` (``mdb_env_copy2``, as ``mdb_copy -c``)."""
    import lmdb

    env = lmdb.open(str(src), readonly=True, lock=False, max_dbs=64)
    try:
        dst.mkdir()
        env.copy(str(dst), compact=True)
    finally:
        env.close()


def rocksdb_api_copy(src: Path, dst: Path, own_files: bool) -> None:
    """rocksdict: a checkpoint of a read-only instance (hard links to the table files);
    with ``own_files``, each link then replaced by a copy, as the convert does."""

    import rocksdict

    db = rocksdict.Rdict(str(src), access_type=rocksdict.AccessType.read_only())
    try:
        rocksdict.Checkpoint(db).create_checkpoint(str(dst))
    finally:
        db.close()
    if own_files:
        for entry in os.scandir(dst):
            if entry.stat(follow_symlinks=False).st_nlink > 1:
                tmp = Path(entry.path + ".own")
                shutil.copyfile(entry.path, tmp)
                os.replace(tmp, entry.path)


def redb_api_copy(
    src: Path, dst: Path, fmt: int, upgrade: bool, copy: list[str] | None = None
) -> None:
    """The file copied (Python's ``shutil.copyfile``, or the command ``copy``), then opened
    and closed by the redb of its format (what the convert's copy does); with
    ``upgrade``, redb 2.6's ``Database::upgrade`` between."""
    from statemigrate import _native

    if copy:
        run([*copy, str(src), str(dst)])
    else:
        shutil.copyfile(src, dst)
    _native.redb_settle_copy(str(dst), fmt, False, upgrade)


def write_source(job: str, src: Path, n: int) -> None:
    """The job's source: the workload, in format 2 for ``redb-2to3-respelt``, or
    (``redb-2to3``) its plain tables in format 2."""
    if job == "redb-2to3-respelt":
        write_workload(get_engine("redb"), src, n, options={"redb_format": 2})
        return
    if job != "redb-2to3":
        write_workload(get_engine(job), src, n)
        return
    from statemigrate.testing.workload import EVENTS, ODD, event_batches, odd_records

    engine = get_engine("redb")
    writer = engine.create_writer(src, {"redb_format": 2})
    try:
        writer.put_metadata({"schema": b"example-app"})
        writer.create_table(EVENTS)
        for batch in event_batches(n):
            writer.write_batch(EVENTS, batch)
        writer.create_table(ODD)
        writer.write_batch(ODD, sorted(odd_records(engine)))
        writer.finish()
    finally:
        writer.close()


def jobs_for(job: str, src: Path, work: Path) -> dict[str, tuple[Callable[[], None], Path]]:
    """Job name -> (what to time, what it makes: removed before each run)."""
    engine = job.split("-")[0]
    dst = work / f"out.{engine}"
    with get_engine(engine).open_reader(src) as reader:
        tables = ",".join(t.name for t in reader.tables())
    convert = [*STATEMIGRATE, "convert", "--quiet", str(src), str(dst), *CONVERT_ARGS.get(job, [])]
    jobs: dict[str, tuple[Callable[[], None], Path]] = {
        "convert": (lambda: run(convert), dst),
        "convert --no-verify": (lambda: run([*convert, "--no-verify"]), dst),
        "convert, batch loop": (lambda: run([*convert, "--tables", tables]), dst),
        "checksum source": (lambda: run([*STATEMIGRATE, "checksum", str(src)]), work / "none"),
        "checksum copy": (
            lambda: run([*STATEMIGRATE, "checksum", str(work / f"kept.{engine}")]),
            work / "none",
        ),
    }
    if engine == "sqlite":
        if shutil.which("sqlite3"):
            vacuum = [
                "sqlite3",
                str(src),
                "VACUUM INTO '" + str(dst).replace("'", "''") + "'",
            ]
            jobs["tool: sqlite3 VACUUM INTO"] = (lambda: run(vacuum), dst)
        jobs["api: backup"] = (lambda: sqlite_api_copy(src, dst, "backup"), dst)
        jobs["api: VACUUM INTO"] = (lambda: sqlite_api_copy(src, dst, "vacuum"), dst)
    elif engine == "rocksdb":
        if shutil.which("ldb"):
            ldb = ["ldb", f"--db={src}", "--ignore_unknown_options", "checkpoint"]
            ldb.append(f"--checkpoint_dir={dst}")
            jobs["tool: ldb checkpoint (links)"] = (lambda: run(ldb), dst)
        jobs["api: Checkpoint (links)"] = (lambda: rocksdb_api_copy(src, dst, False), dst)
        jobs["api: Checkpoint, own files"] = (lambda: rocksdb_api_copy(src, dst, True), dst)
    elif engine == "redb":
        upgrade = job.startswith("redb-2to3")
        fmt = 2 if upgrade else 3
        if shutil.which("cp"):
            jobs["tool: cp"] = (lambda: run(["cp", str(src), str(dst)]), dst)
            if upgrade:
                jobs["tool: cp + Database::upgrade"] = (
                    lambda: redb_api_copy(src, dst, fmt, upgrade, copy=["cp"]),
                    dst,
                )
        name = "api: copy + Database::upgrade" if upgrade else "api: copy, opened by redb"
        jobs[name] = (lambda: redb_api_copy(src, dst, fmt, upgrade), dst)
    else:
        if shutil.which("mdb_copy"):

            def mdb_copy() -> None:
                dst.mkdir()
                run(["mdb_copy", "-c", str(src), str(dst)])

            jobs["tool: mdb_copy -c"] = (mdb_copy, dst)
        jobs["api: env.copy(compact)"] = (lambda: lmdb_api_copy(src, dst), dst)
    return jobs


def measure(job: str, n: int, runs: int, work: Path) -> dict[str, float]:
    engine = job.split("-")[0]
    src = work / f"src.{engine}"
    remove(src)
    print(f"{job}: writing {n:,} events", file=sys.stderr)
    write_source(job, src, n)
    kept = work / f"kept.{engine}"
    remove(kept)
    # The copy to digest.
    run([*STATEMIGRATE, "convert", "--quiet", str(src), str(kept), *CONVERT_ARGS.get(job, [])])
    jobs = jobs_for(job, src, work)
    jobs["statemigrate --version"] = (lambda: run([*STATEMIGRATE, "--version"]), work / "none")
    times: dict[str, list[float]] = {name: [] for name in jobs}
    cpu: dict[str, list[float]] = {name: [] for name in jobs}
    for round_ in range(runs):
        for name, (timed, made) in jobs.items():
            remove(made)
            settle()
            cpu_before = cpu_seconds()
            started = time.perf_counter()
            timed()
            times[name].append(time.perf_counter() - started)
            cpu[name].append(cpu_seconds() - cpu_before)
            remove(made)
        print(f"{job}: round {round_ + 1} of {runs} done", file=sys.stderr)
    remove(src)
    remove(kept)
    out = {name: statistics.median(t) for name, t in times.items()}
    out.update({f"{name} (CPU)": statistics.median(t) for name, t in cpu.items()})
    return out


def cpu_seconds() -> float:
    """User and system CPU seconds of this process and its finished children so far.

    Load-independent where wall time is not: on a shared machine the wall clock of one
    job includes the other users' turns on the cores.
    """
    me, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def bounds(m: dict[str, float], cpu: bool = False, respelt: bool = False) -> dict[str, float]:
    """The issue's two bounds and the convert's ratio to each (<= 1 meets it); with
    ``respelt`` (the ``redb-2to3-respelt`` job) also the convert against 2.5 x (the
    fastest copy + ``Database::upgrade``).

    With ``cpu``, the same bounds over CPU seconds instead of wall time.
    """
    tail = " (CPU)" if cpu else ""
    copies = [
        v for k, v in m.items() if k.startswith(("tool:", "api:")) and (cpu == k.endswith(" (CPU)"))
    ]
    tools = [v for k, v in m.items() if k.startswith("tool:") and (cpu == k.endswith(" (CPU)"))]
    scans = max(m["checksum source" + tail], m["checksum copy" + tail])
    verified = 1.2 * (min(copies) + scans)
    no_verify = 1.2 * (min(tools or copies) + m["statemigrate --version" + tail])
    upgrades = [
        v
        for k, v in m.items()
        if k.endswith("+ Database::upgrade" + tail) and (cpu == k.endswith(" (CPU)"))
    ]
    against_upgrade = {}
    if respelt and upgrades:
        against_upgrade = {
            f"re-spelt bound{tail}": RESPELT_BOUND * min(upgrades),
            f"re-spelt ratio{tail}": m["convert" + tail] / (RESPELT_BOUND * min(upgrades)),
            f"convert ÷ (copy + upgrade){tail}": m["convert" + tail] / min(upgrades),
        }
    return {
        **against_upgrade,
        f"verified bound{tail}": verified,
        f"verified ratio{tail}": m["convert" + tail] / verified,
        f"--no-verify bound{tail}": no_verify,
        f"--no-verify ratio{tail}": m["convert --no-verify" + tail] / no_verify,
        f"speed-up over the batch loop{tail}": m["convert, batch loop" + tail]
        / m["convert" + tail],
    }


SHOWN = {"sqlite": "SQLite", "lmdb": "LMDB", "rocksdb": "RocksDB", "redb": "redb",
         "redb-2to3": "redb 2 → 3", "redb-2to3-respelt": "redb 2 → 3, re-spelt"}  # fmt: skip


def results_table(results: dict[str, Any], command: str, conditions: str) -> R.Table:
    """Each engine's row as the data file ``results/same-engine.json``.

    Args:
        results: by job (``sqlite``, ``redb-2to3`` …), its ``seconds`` (by name, as
            :func:`measure` gives them) and its :func:`bounds`.
        command: the command line that measured them.
        conditions: how (rounds, machine).
    """

    def fastest(seconds: dict[str, float], kind: str) -> float | None:
        found = [v for k, v in seconds.items() if k.startswith(kind) and not k.endswith("(CPU)")]
        return min(found) if found else None

    rows = []
    for job, r in results.items():
        s = r["seconds"]
        rows.append([
            SHOWN.get(job, job), s["convert"], s["convert --no-verify"], s["convert, batch loop"],
            fastest(s, "tool:"), fastest(s, "api:"), r["verified ratio"], r["--no-verify ratio"],
            r["speed-up over the batch loop"],
        ])  # fmt: skip
    return R.Table(
        name="same-engine",
        title="Same-engine converts (the engine's own copy) against their bounds",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("engine", align="left"),
            R.Column("convert", ".2f", " s"),
            R.Column("`--no-verify`", ".2f", " s"),
            R.Column("batch loop", ".2f", " s"),
            R.Column("copy tool", ".2f", " s"),
            R.Column("API copy", ".2f", " s"),
            R.Column("verified ÷ bound", ".2f"),
            R.Column("`--no-verify` ÷ bound", ".2f"),
            R.Column("speed-up over the batch loop", ".2f", "×"),
        ],
        rows=rows,
        notes=[
            (
                "Bounds: a verified convert at most 1.2 × (the fastest copy + the slower "
                "checksum scan); `--no-verify` at most 1.2 × (the copy tool + the start-up). "
                "A ratio of at most 1 meets its bound."
            ),
            *(
                f"{SHOWN.get(job, job)}: the verified convert is "
                f"{r['convert ÷ (copy + upgrade)']:.2f} × (the fastest copy + redb 2.6's "
                f"`Database::upgrade`); its bound is {RESPELT_BOUND} ×."
                for job, r in results.items()
                if "convert ÷ (copy + upgrade)" in r
            ),
            (
                "Copy tools: `sqlite3 VACUUM INTO`, `mdb_copy -c`, `ldb checkpoint` (hard "
                "links), `cp` for redb (which has none); API copies: apsw's backup, "
                "`env.copy(compact=True)`, rocksdict's `Checkpoint`, the file opened by redb."
            ),
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default="sqlite,lmdb,rocksdb,redb,redb-2to3,redb-2to3-respelt")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None, help="also write the results here")
    R.add_argument(ap)
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="sm-native-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    for engine in [e for e in args.engines.split(",") if e]:
        m = measure(engine, args.n, args.runs, work)
        respelt = engine == "redb-2to3-respelt"
        results[engine] = {
            "seconds": m,
            **bounds(m, respelt=respelt),
            **bounds(m, cpu=True, respelt=respelt),
        }
    print(f"\n{args.n:,} events, medians of {args.runs} rounds\n")
    for engine, r in results.items():
        print(f"{engine}")
        for name, seconds in r["seconds"].items():
            if not name.endswith("(CPU)"):
                cpu = r["seconds"][f"{name} (CPU)"]
                print(f"  {name:32} {seconds:7.2f} s   CPU {cpu:6.2f} s")
        for name in ("verified", "--no-verify", "re-spelt"):
            if name + " bound" not in r:
                continue
            print(
                f"  {name + ' bound':32} {r[name + ' bound']:7.2f} s   "
                f"convert / bound = {r[name + ' ratio']:.2f}   "
                f"over CPU seconds {r[name + ' ratio (CPU)']:.2f}"
            )
        speed, speed_cpu = (
            r["speed-up over the batch loop"],
            r["speed-up over the batch loop (CPU)"],
        )
        print(
            f"  {'speed-up over the batch loop':32} {speed:7.2f} x   over CPU seconds {speed_cpu:.2f} x"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"n": args.n, "runs": args.runs, **results}, indent=2)
        )
    conditions = (
        f"{args.n:,} events, medians of {args.runs} rounds, whole processes, warm page cache; "
        f"{R.machine()}"
    )
    command = R.command_line("bench_native_copy.py", sys.argv[1:])
    R.write_from(results_table(results, command, conditions), args)


if __name__ == "__main__":
    main()
