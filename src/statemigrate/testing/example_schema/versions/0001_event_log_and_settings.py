"""Event log, versioned settings, preferences and a thumbnail cache.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Layout at this revision (what the app writes):

- ``events``: key ``folder (UTF-8) · 0x00 · seq (u64 big-endian)``, value JSON
  ``{"ts": ms, "kind": str, "payload": str}`` (compact separators).
- ``settings`` (versioned): key a setting name, value UTF-8.
- ``prefs``: key a preference name, value UTF-8.
- ``thumbnail_cache``: key a file hash, value image bytes (a cache the app rebuilds).
"""

from statemigrate import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("events")
    op.create_table("settings", versioned=True)
    op.create_table("prefs")
    op.create_table("thumbnail_cache")
    op.put("settings", b"schema.origin", b"statemigrate-example", version=1)


def downgrade() -> None:
    for table in ("thumbnail_cache", "prefs", "settings", "events"):
        op.drop_table(table)
