"""Active replication: two live replicas of a job on the same input, cutting identical
micro-batches, so that either one's death is invisible at the sink (paper 002).

  control_topic.py  a one-partition topic folded in offset order (the order and heartbeat logs)
  order_log.py      KaZoo's order log: the leader's batch boundaries, fenced by epoch
  kazoo.py          cut policy ``kazoo``: the leader cuts and publishes, the follower follows
                    and takes over the lease when the leader's heartbeat stops
  heartbeats.py     LiveRobin's heartbeat generator and its index of complete heartbeats
  liverobin.py      cut policy ``liverobin``: a batch ends at the next complete heartbeat
"""
