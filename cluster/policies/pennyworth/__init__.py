"""Pennyworth (the Pennyworth paper; docs/pennyworth.md): A*-optimal VM renting and job
placement under an SLO.

`problem` turns a batch into the allocation problem (tasks, their mean run time on each
VM type, prices, start-up costs); `plan` prices a complete allocation (eq. 1); `astar`
finds the cheapest one.
"""
