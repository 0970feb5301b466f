"""Active replication: two live replicas of a job on the same input, cutting identical
micro-batches, so that either one's death is invisible at the sink (paper 002).

  (the order and heartbeat logs are one-partition topics: recovery_lib/kafka/control_topic.py)
  order_log.py      KaZoo's order log: the leader's batch boundaries, fenced by epoch
  kazoo.py          cut policy ``kazoo``: the leader cuts and publishes, the follower follows
                    and takes over the lease when the leader's heartbeat stops
  heartbeats.py     LiveRobin's heartbeat generator and its index of complete heartbeats
  liverobin.py      cut policy ``liverobin``: a batch ends at the next complete heartbeat
  gate.py           the replica gate: the first copy of every id, for plain consumers
  leases.py         a replica's lease (heartbeat file) and incarnation
  shared_determinants.py  nondeterministic jobs: one writer per determinant stream
  replica_set.py    ``ReplicaSet``: two supervised replicas, replacement of a dead one
"""
