"""Re-key the event log from folder · seq to seq · folder.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Readers now scan events in sequence order across folders. ``op.rekey`` re-sorts the
records (an external sort: memory stays bounded on any table size).
"""

from statemigrate import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def seq_first(record):
    key = record[0]
    return key[-8:] + key[:-9]  # seq (8 bytes) · folder


def folder_first(record):
    key = record[0]
    return key[8:] + b"\x00" + key[:8]  # folder · 0x00 · seq


def upgrade() -> None:
    op.rekey("events", seq_first)


def downgrade() -> None:
    op.rekey("events", folder_first)
