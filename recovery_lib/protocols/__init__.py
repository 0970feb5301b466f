"""Checkpoint protocols across a pipeline's stages (CheckMate, paper 001).

base.py                    the protocol interface (stage options, recovery plan) and the
                           three protocols: Coordinated, Uncoordinated,
                           CommunicationInduced
checkpoints.py             the checkpoint graph: stages, channels (topics), positions
recovery_line.py           rollback propagation to the recovery line; invalid checkpoints
coordinated.py             COOR: epoch markers as positions, the aligned cut, global
                           checkpoints
communication_induced.py   CIC: HMNR clocks, the forced cut
hooks.py                   the stage's sink hooks: checkpoint records, CIC headers
stage_log.py               what the protocol keeps on disk per stage
"""
