"""High availability: processes that take over from a failed job, and the fencing that keeps a
zombie from writing.

  fencing.py    epochs (who may write), the sink's write guard, fence records at takeover
  standby/      a warm standby fed by shipped checkpoints (Clonos), its pair supervisor
  replication/  active replication: two live replicas, leader-based (KaZoo) and leaderless
                (LiveRobin), and the gate that serves a plain consumer once
"""
