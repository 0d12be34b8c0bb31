"""Row indices of the engine's struct-of-arrays state.

The engine keeps each entity kind in one 2-D array whose rows are fields: `jobs_f[REM]`
is the remaining work of every job. Plain integers keep the compiled loop simple and the
state plain data (copyable, picklable, shippable to Ray actors).
"""

from __future__ import annotations

# jobs_f: float64[JF_ROWS, n_jobs]
ARRIVAL, SIZE, REM, RATE, CORES, START, END, CORE_SECONDS = 0, 1, 2, 3, 4, 5, 6, 7
REQ_CPU, REQ_MEM, REQ_GPU, COST, SETUP_S = 8, 9, 10, 11, 12
JF_ROWS = 13

# jobs_i: int64[JI_ROWS, n_jobs]
CLS, NODE, POOL, NEXT, PREV, STATE, RETRIES = 0, 1, 2, 3, 4, 5, 6
JI_ROWS = 7
# job states
FUTURE, QUEUED, RUNNING, DONE, FAILED = 0, 1, 2, 3, 4

# nodes_f: float64[NF_ROWS, n_nodes]
CAP_CPU, CAP_MEM, CAP_GPU, FREE_CPU, FREE_MEM, FREE_GPU, SPEED, PRICE_PER_S = 0, 1, 2, 3, 4, 5, 6, 7
CAP_SLOTS, FREE_SLOTS = 8, 9
NF_ROWS = 10
# nodes_i: int64[NI_ROWS, n_nodes]
NODE_TYPE, ACTIVE = 0, 1
NI_ROWS = 2

# pools_f: float64[PF_ROWS, n_pools]
P_CORES, P_SPEED, P_LAST, P_NEXT_T, P_ALLOCATED, P_BUSY_AREA, P_PRICE_PER_S = 0, 1, 2, 3, 4, 5, 6
PF_ROWS = 7
# pools_i: int64[PI_ROWS, n_pools]
P_HEAD, P_TAIL, P_COUNT, P_NEXT_J, P_NEED_ALLOC = 0, 1, 2, 3, 4
PI_ROWS = 5

# classes_f: float64[CF_ROWS, n_classes]
HOLDING_COST, SP_PARAM, TIMEOUT_S, SP_PARAM2 = 0, 1, 2, 3
CF_ROWS = 4
# classes_i: int64[CI_ROWS, n_classes]
SP_KIND, CLASS_POOL, SP_NPTS = 0, 1, 2
CI_ROWS = 3

# istate: int64[IS_ROWS]
NEXT_ARRIVAL, HEAP_N, Q_HEAD, Q_TAIL, NEED_PLACE, DONE_COUNT, EVENTS = 0, 1, 2, 3, 4, 5, 6
PLACER_CODE, ALLOC_CODE, STATUS_POOL, N_SYSTEM, DECISIONS, FAILED_COUNT = 7, 8, 9, 10, 11, 12
IS_ROWS = 13

# fstate: float64[FS_ROWS]
NOW, WIN_START, WIN_END, HORIZON, BUSY_CPU, BUSY_AREA, MEASURED_TIME = 0, 1, 2, 3, 4, 5, 6
FS_ROWS = 7

# event kinds in the heap
EV_COMPLETE, EV_NODE_READY, EV_TIMER = 0, 1, 2

# kernel return codes
FINISHED, NEED_PLACE_DECISION, NEED_ALLOC_DECISION, PAUSED, YIELDED = 0, 1, 2, 3, 4

# speed-up kinds (same codes as cluster.speedup)
LINEAR_CODE, AMDAHL_CODE, POWER_CODE, ROOFTOP_CODE, TABLE_CODE = 0, 1, 2, 3, 4
SMOOTH_ROOFTOP_CODE = 5
