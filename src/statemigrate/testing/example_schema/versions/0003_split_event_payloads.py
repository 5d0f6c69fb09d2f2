"""Split events into a compact binary header and a separate payload table.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

``events`` values go from JSON to ``ts (u64 BE) · len(kind) (u8) · kind``; the payload
moves to ``event_payloads`` (same keys, the payload's UTF-8 bytes). The downgrade
reads both tables in key order side by side and rebuilds the exact JSON.
"""

import json
import struct

from statemigrate import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_HEAD = struct.Struct(">QB")
_decode = json.JSONDecoder().decode  # str in: no encoding sniffing per record


def to_header(records):
    out = []
    for key, value in records:
        event = _decode(value.decode())
        kind = event["kind"].encode()
        out.append((key, _HEAD.pack(event["ts"], len(kind)) + kind))
    return out


def to_payload(records):
    return [(key, _decode(value.decode())["payload"].encode()) for key, value in records]


def upgrade() -> None:
    # Batch functions (a list of records in, a list out) save a Python call per record;
    # one_pass reads events once for both (neither function depends on the other).
    with op.one_pass():
        op.copy_table("events", "event_payloads", to_payload, batch=True)
        op.rewrite("events", to_header, batch=True)


def downgrade() -> None:
    payloads = op.records("event_payloads")

    def to_json(record):
        key, header = record
        pkey, payload = next(payloads)
        assert pkey == key, "events and event_payloads hold the same keys"
        ts, n = _HEAD.unpack_from(header)
        kind = header[_HEAD.size : _HEAD.size + n].decode()
        event = {"ts": ts, "kind": kind, "payload": payload.decode()}
        return key, json.dumps(event, separators=(",", ":")).encode()

    op.rewrite("events", to_json)
    op.drop_table("event_payloads")
