"""The store-access layer under the verbs: naming and opening stores, the writer lock,
the digest walk, the interrupted-upgrade check.

``pipeline`` (convert), ``schema`` (upgrades) and ``verification`` are peers: each
imports this layer and the engines, never one another.
"""
