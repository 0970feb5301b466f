"""Standby jobs (Clonos high availability): a warm standby fed by shipped checkpoints that
takes over when the primary's lease expires, with the old primary fenced out
(recovery_lib/ha/fencing.py).

  shipping.py   incremental, checksummed checkpoint copies; the newest complete one is used
  follow.py     replaying the primary's batches with its exact boundaries after takeover
  process.py    the standby process: warm session, shipper, lease watch, takeover
  pair.py       supervising a primary with its standby (experiment mode ``standby``)
"""
