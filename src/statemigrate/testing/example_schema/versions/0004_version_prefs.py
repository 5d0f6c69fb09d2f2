"""Make preferences versioned (optimistic concurrency), starting at version 1.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from statemigrate import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.set_versioned("prefs", initial_version=1)


def downgrade() -> None:
    op.set_plain("prefs")
