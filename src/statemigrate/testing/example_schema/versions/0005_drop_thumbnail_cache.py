"""Drop the obsolete thumbnail cache (the app no longer keeps thumbnails).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

A cache holds nothing the app cannot rebuild, so the downgrade recreates it empty.
"""

from statemigrate import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("thumbnail_cache")


def downgrade() -> None:
    op.create_table("thumbnail_cache")
