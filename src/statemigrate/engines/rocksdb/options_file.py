"""RocksDB's OPTIONS file, read (comparators) and written in an older RocksDB's form.

RocksDB writes an ``OPTIONS-NNNNNN`` file (INI-like: ``[Version]``, ``[DBOptions]``,
``[CFOptions "family"]``, ``[TableOptions/BlockBasedTable "family"]``, one ``key=value``
a line, struct values as ``{key=value;...}``) each time it opens a store. ``DB::Open``
does not read it; tools do (``ldb``, ``LoadLatestOptions``, rocksdict opening a store
without options), and an older RocksDB refuses a key it does not know (RocksDB 7.8's
``ldb``: ``Could not find option: : metadata_write_temperature``, a key of the RocksDB
bundled in rocksdict). Option ``rocksdb_compat`` rewrites the files of a store the
writer closed, keeping only the keys (and the keys inside struct values) the named
RocksDB writes itself: :data:`ROCKSDB_7_8_KEYS`, taken from the OPTIONS files that
Debian 12's RocksDB 7.8.3 (``ldb``) writes (tests/test_layout_rocksdb.py compares them).
The values are the writer's own: only keys are dropped, none is added or changed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "COMPAT_CHOICES",
    "MAX_FORMAT_VERSION",
    "NEWEST",
    "OptionsSection",
    "comparators",
    "compat_text",
    "latest_options",
    "options_files",
    "parse_options",
    "rewrite_options",
]

NEWEST = "newest"  # the RocksDB statemigrate writes with: its OPTIONS files as they are
COMPAT_CHOICES = ("7.8", NEWEST)
# The newest block-based table format each release reads (format 6 came with RocksDB 8.6).
MAX_FORMAT_VERSION = {"7.8": 5}
OPTIONS_FILE = re.compile(r"OPTIONS-(\d+)")
_HEADER = re.compile(r'\[([^\]" ]+)(?: "(.*)")?\]')

# The keys inside RocksDB 7.8.3's ``compression_opts`` and ``bottommost_compression_opts``.
_COMPRESSION_OPTS_7_8 = (
    "enabled",
    "level",
    "max_dict_buffer_bytes",
    "max_dict_bytes",
    "parallel_threads",
    "strategy",
    "use_zstd_dict_trainer",
    "window_bits",
    "zstd_max_train_bytes",
)

# What RocksDB 7.8.3 writes in an OPTIONS file: each section kind's keys; for a struct
# value, the keys inside its braces (None: a plain value). From ``ldb`` 7.8.3's files.
ROCKSDB_7_8_KEYS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "Version": {
        "options_file_version": None,
        "rocksdb_version": None,
    },
    "DBOptions": {
        "WAL_size_limit_MB": None,
        "WAL_ttl_seconds": None,
        "access_hint_on_compaction_start": None,
        "advise_random_on_open": None,
        "allow_2pc": None,
        "allow_concurrent_memtable_write": None,
        "allow_data_in_errors": None,
        "allow_fallocate": None,
        "allow_ingest_behind": None,
        "allow_mmap_reads": None,
        "allow_mmap_writes": None,
        "atomic_flush": None,
        "avoid_flush_during_recovery": None,
        "avoid_flush_during_shutdown": None,
        "avoid_unnecessary_blocking_io": None,
        "best_efforts_recovery": None,
        "bgerror_resume_retry_interval": None,
        "bytes_per_sync": None,
        "compaction_readahead_size": None,
        "create_if_missing": None,
        "create_missing_column_families": None,
        "db_host_id": None,
        "db_write_buffer_size": None,
        "delayed_write_rate": None,
        "delete_obsolete_files_period_micros": None,
        "dump_malloc_stats": None,
        "enable_pipelined_write": None,
        "enable_thread_tracking": None,
        "enable_write_thread_adaptive_yield": None,
        "enforce_single_del_contracts": None,
        "error_if_exists": None,
        "fail_if_options_file_error": None,
        "file_checksum_gen_factory": None,
        "flush_verify_memtable_count": None,
        "info_log_level": None,
        "is_fd_close_on_exec": None,
        "keep_log_file_num": None,
        "log_file_time_to_roll": None,
        "log_readahead_size": None,
        "lowest_used_cache_tier": None,
        "manifest_preallocation_size": None,
        "manual_wal_flush": None,
        "max_background_compactions": None,
        "max_background_flushes": None,
        "max_background_jobs": None,
        "max_bgerror_resume_count": None,
        "max_file_opening_threads": None,
        "max_log_file_size": None,
        "max_manifest_file_size": None,
        "max_open_files": None,
        "max_subcompactions": None,
        "max_total_wal_size": None,
        "max_write_batch_group_size_bytes": None,
        "paranoid_checks": None,
        "persist_stats_to_disk": None,
        "random_access_max_buffer_size": None,
        "recycle_log_file_num": None,
        "skip_checking_sst_file_sizes_on_db_open": None,
        "skip_stats_update_on_db_open": None,
        "stats_dump_period_sec": None,
        "stats_history_buffer_size": None,
        "stats_persist_period_sec": None,
        "strict_bytes_per_sync": None,
        "table_cache_numshardbits": None,
        "track_and_verify_wals_in_manifest": None,
        "two_write_queues": None,
        "unordered_write": None,
        "use_adaptive_mutex": None,
        "use_direct_io_for_flush_and_compaction": None,
        "use_direct_reads": None,
        "use_fsync": None,
        "verify_sst_unique_id_in_manifest": None,
        "wal_bytes_per_sync": None,
        "wal_compression": None,
        "wal_filter": None,
        "wal_recovery_mode": None,
        "writable_file_max_buffer_size": None,
        "write_dbid_to_manifest": None,
        "write_thread_max_yield_usec": None,
        "write_thread_slow_yield_usec": None,
    },
    "CFOptions": {
        "arena_block_size": None,
        "blob_compaction_readahead_size": None,
        "blob_compression_type": None,
        "blob_file_size": None,
        "blob_file_starting_level": None,
        "blob_garbage_collection_age_cutoff": None,
        "blob_garbage_collection_force_threshold": None,
        "bloom_locality": None,
        "bottommost_compression": None,
        "bottommost_compression_opts": _COMPRESSION_OPTS_7_8,
        "check_flush_compaction_key_order": None,
        "compaction_filter": None,
        "compaction_filter_factory": None,
        "compaction_options_fifo": ("age_for_warm", "allow_compaction", "max_table_files_size"),
        "compaction_options_universal": (
            "allow_trivial_move",
            "compression_size_percent",
            "incremental",
            "max_merge_width",
            "max_size_amplification_percent",
            "min_merge_width",
            "size_ratio",
            "stop_style",
        ),
        "compaction_pri": None,
        "compaction_style": None,
        "comparator": None,
        "compression": None,
        "compression_opts": _COMPRESSION_OPTS_7_8,
        "disable_auto_compactions": None,
        "enable_blob_files": None,
        "enable_blob_garbage_collection": None,
        "experimental_mempurge_threshold": None,
        "force_consistency_checks": None,
        "hard_pending_compaction_bytes_limit": None,
        "ignore_max_compaction_bytes_for_input": None,
        "inplace_update_num_locks": None,
        "inplace_update_support": None,
        "last_level_temperature": None,
        "level0_file_num_compaction_trigger": None,
        "level0_slowdown_writes_trigger": None,
        "level0_stop_writes_trigger": None,
        "level_compaction_dynamic_file_size": None,
        "level_compaction_dynamic_level_bytes": None,
        "max_bytes_for_level_base": None,
        "max_bytes_for_level_multiplier": None,
        "max_bytes_for_level_multiplier_additional": None,
        "max_compaction_bytes": None,
        "max_sequential_skip_in_iterations": None,
        "max_successive_merges": None,
        "max_write_buffer_number": None,
        "max_write_buffer_number_to_maintain": None,
        "max_write_buffer_size_to_maintain": None,
        "memtable_factory": None,
        "memtable_huge_page_size": None,
        "memtable_insert_with_hint_prefix_extractor": None,
        "memtable_prefix_bloom_size_ratio": None,
        "memtable_protection_bytes_per_key": None,
        "memtable_whole_key_filtering": None,
        "merge_operator": None,
        "min_blob_size": None,
        "min_write_buffer_number_to_merge": None,
        "num_levels": None,
        "optimize_filters_for_hits": None,
        "paranoid_file_checks": None,
        "periodic_compaction_seconds": None,
        "preclude_last_level_data_seconds": None,
        "prefix_extractor": None,
        "prepopulate_blob_cache": None,
        "preserve_internal_time_seconds": None,
        "report_bg_io_stats": None,
        "sample_for_compression": None,
        "soft_pending_compaction_bytes_limit": None,
        "sst_partitioner_factory": None,
        "table_factory": None,
        "target_file_size_base": None,
        "target_file_size_multiplier": None,
        "ttl": None,
        "write_buffer_size": None,
    },
    "TableOptions/BlockBasedTable": {
        "block_align": None,
        "block_restart_interval": None,
        "block_size": None,
        "block_size_deviation": None,
        "cache_index_and_filter_blocks": None,
        "cache_index_and_filter_blocks_with_high_priority": None,
        "checksum": None,
        "data_block_hash_table_util_ratio": None,
        "data_block_index_type": None,
        "detect_filter_construct_corruption": None,
        "enable_index_compression": None,
        "filter_policy": None,
        "flush_block_policy_factory": None,
        "format_version": None,
        "index_block_restart_interval": None,
        "index_shortening": None,
        "index_type": None,
        "initial_auto_readahead_size": None,
        "max_auto_readahead_size": None,
        "metadata_block_size": None,
        "metadata_cache_options": (
            "partition_pinning",
            "top_level_index_pinning",
            "unpartitioned_pinning",
        ),
        "no_block_cache": None,
        "num_file_reads_for_auto_readahead": None,
        "optimize_filters_for_memory": None,
        "partition_filters": None,
        "pin_l0_filter_and_index_blocks_in_cache": None,
        "pin_top_level_index_and_filter": None,
        "prepopulate_block_cache": None,
        "read_amp_bytes_per_bit": None,
        "verify_compression": None,
        "whole_key_filtering": None,
    },
}


KNOWN_KEYS = {"7.8": ROCKSDB_7_8_KEYS}


@dataclass
class OptionsSection:
    """One ``[kind "name"]`` section of an OPTIONS file: its lines as ``(key, value)``."""

    kind: str
    name: str | None
    entries: list[tuple[str, str]] = field(default_factory=list)

    def get(self, key: str) -> str | None:
        return next((v for k, v in self.entries if k == key), None)


def parse_options(text: str) -> list[OptionsSection]:
    """The sections of an OPTIONS file, in order (comments and blank lines left out).

    Raises:
        ValueError: a line that is neither a section header nor ``key=value``.
    """
    sections: list[OptionsSection] = []
    # Lines end at "\n" only: a column family's name in a section header may hold any
    # other character (str.splitlines also splits at \x1c-\x1e, \x85, \u2028 ...).
    for number, line in enumerate(text.split("\n"), 1):
        s = line.strip(" \t\r")
        if not s or s.startswith("#"):
            continue
        header = _HEADER.fullmatch(s)
        if header:
            sections.append(OptionsSection(header.group(1), header.group(2)))
            continue
        key, eq, value = s.partition("=")
        if not eq or not sections:
            raise ValueError(f"line {number} is not an option: {s[:80]!r}")
        sections[-1].entries.append((key.strip(), value.strip()))
    return sections


def _struct_fields(value: str) -> list[str] | None:
    """The ``key=value`` fields of a struct value ``{...}`` (None: not a struct)."""
    if not (value.startswith("{") and value.endswith("}")):
        return None
    fields, depth, start = [], 0, 1
    for i, c in enumerate(value[1:-1], 1):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            fields.append(value[start:i])
            start = i + 1
    if value[start:-1]:
        fields.append(value[start:-1])
    return fields


def _kept(value: str, known: tuple[str, ...] | None) -> str:
    fields = _struct_fields(value)
    if known is None or fields is None:
        return value
    return "{" + "".join(f + ";" for f in fields if f.partition("=")[0] in known) + "}"


def compat_text(text: str, compat: str) -> str:
    """The OPTIONS file ``text`` with only the keys RocksDB ``compat`` knows.

    Raises:
        ValueError: a section kind that release does not have (its table factory, say):
            the file cannot be put in its form by leaving keys out.
    """
    known = KNOWN_KEYS[compat]
    out = [
        "# This is a RocksDB option file.",
        f"# Its keys are those RocksDB {compat} writes (statemigrate's rocksdb_compat).",
        "",
    ]
    for section in parse_options(text):
        keys = known.get(section.kind)
        if keys is None:
            raise ValueError(f"RocksDB {compat} has no OPTIONS section [{section.kind}]")
        name = f' "{section.name}"' if section.name is not None else ""
        out.append(f"[{section.kind}{name}]")
        for key, value in section.entries:
            if key in keys:
                out.append(f"  {key}={_kept(value, keys[key])}")
        out.append("")
    return "\n".join(out) + "\n"


def options_files(store: Path) -> list[Path]:
    """The store's OPTIONS files, oldest first."""
    found = []
    for entry in os.scandir(store):
        m = OPTIONS_FILE.fullmatch(entry.name)
        if m and entry.is_file(follow_symlinks=False):
            found.append((int(m.group(1)), Path(entry.path)))
    return [p for _, p in sorted(found)]


def latest_options(store: Path) -> list[OptionsSection] | None:
    """The sections of the store's newest OPTIONS file (None: it has none)."""
    files = options_files(store)
    if not files:
        return None
    return parse_options(files[-1].read_text(encoding="utf-8", errors="replace"))


def comparators(store: Path) -> dict[str, str]:
    """Each column family's comparator, as the newest OPTIONS file names it."""
    sections = latest_options(store) or []
    return {
        s.name or "": s.get("comparator") or ""
        for s in sections
        if s.kind == "CFOptions" and s.get("comparator") is not None
    }


def rewrite_options(store: Path, compat: str) -> None:
    """Put every OPTIONS file of the closed store ``store`` in RocksDB ``compat``'s form,
    each replaced atomically and synced (a kill leaves the old or the new file)."""
    if compat == NEWEST:
        return
    for path in options_files(store):
        text = compat_text(path.read_text(encoding="utf-8"), compat)
        tmp = path.with_name(path.name + ".sm-tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, flags, 0o644)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    dirfd = os.open(store, os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)
