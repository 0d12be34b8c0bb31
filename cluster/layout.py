"""The rows of the engine's struct-of-arrays state, as `IntEnum`s.

The engine keeps each entity kind in one 2-D array whose rows are fields: `jobs_f[JF.REM]`
is the remaining work of every job. The row enums number themselves (no hand-counted
constants); numba reads `IntEnum` members as compile-time integers, so the compiled loop
indexes with them directly. The arrays are grouped in `clusteremu.cluster.state.EngineState`.

Units: seconds, cores, GB, GPUs (milli-GPU where named), dollars.
"""

from __future__ import annotations

from enum import IntEnum


class JF(IntEnum):
    """Rows of `jobs_f` (float64[len(JF), jobs])."""

    ARRIVAL = 0  #: arrival time, s
    SIZE = 1  #: work, core-seconds at speed 1
    REM = 2  #: remaining work of a malleable job, core-seconds
    RATE = 3  #: current rate of a malleable job, work per s
    CORES = 4  #: cores of a malleable job
    START = 5  #: start of the current (last) attempt, s
    END = 6  #: end (completion or failure), s
    CORE_SECONDS = 7  #: core-seconds used by a malleable job
    REQ_CPU = 8  #: request, cores
    REQ_MEM = 9  #: request, GB
    REQ_GPU = 10  #: request, GPUs (< 1: a share of one GPU; >= 1: whole GPUs)
    COST = 11  #: money of a malleable job, dollars
    SETUP_S = 12  #: set-up delay of the current attempt (image pull, data), s
    DUE = 13  #: scheduled end of the current attempt, s (stale heap entries differ)
    WASTE_CORE_S = 14  #: core-seconds held by killed attempts (work lost)
    # Real usage (`clusteremu.cluster.usage`; NaN: exactly the request). Filled only with a usage
    # model.
    USE_CPU = 15  #: cores the job keeps busy
    USE_MEM = 16  #: memory peak, GB (above the request: killed, out-of-memory, at the peak)
    PEAK_AT = 17  #: fraction of the run time at which the memory peak occurs
    RESERVED_CPU_S = 18  #: core-seconds reserved over all attempts (with a usage model)
    RESERVED_MEM_S = 19  #: GB-seconds reserved over all attempts (with a usage model)
    USED_CPU_S = 20  #: core-seconds really used over all attempts (with a usage model)
    USED_MEM_S = 21  #: GB-seconds really used (peak held) over all attempts (usage model)
    LOST_CORE_S = 22  #: core-seconds of work lost by node failures (killed attempts)
    ESTIMATE = 23  #: the user's estimate of the run time (a trace's requested time), s; 0: none


class JI(IntEnum):
    """Rows of `jobs_i` (int64[len(JI), jobs])."""

    CLS = 0  #: class index
    NODE = 1  #: node of the current (last) attempt, or -1
    POOL = 2  #: malleable pool, or -1
    NEXT = 3  #: next job in the pool's list
    PREV = 4  #: previous job in the pool's list
    STATE = 5  #: a `JobState`
    RETRIES = 6  #: attempts killed and re-queued
    GPU_MASK = 7  #: bit g set: the job holds (a share of) GPU g of its node
    QPOS = 8  #: index of the job's live entry in the placement queue
    OOM_KILLS = 9  #: attempts killed out-of-memory
    FAIL_KILLS = 10  #: attempts killed by node failures (`docs/faults.md`)


class JobState(IntEnum):
    FUTURE = 0
    QUEUED = 1
    RUNNING = 2
    DONE = 3
    FAILED = 4


class NF(IntEnum):
    """Rows of `nodes_f` (float64[len(NF), node rows])."""

    CAP_CPU = 0  #: cores
    CAP_MEM = 1  #: GB
    CAP_GPU = 2  #: whole GPUs
    FREE_CPU = 3
    FREE_MEM = 4
    FREE_GPU = 5  #: free GPU capacity in GPUs (sum of the GPUs' free milli / 1000)
    SPEED = 6  #: relative speed
    PRICE_PER_S = 7  #: dollars per second while active
    CAP_SLOTS = 8  #: most jobs at once (worker slots)
    FREE_SLOTS = 9
    STARTUP_COST = 10  #: dollars, paid once when rented
    RENTED_AT = 11  #: s
    READY_AT = 12  #: s (rented + start-up delay)
    RELEASED_AT = 13  #: s, or +inf while held
    RUNNING_JOBS = 14  #: jobs running on the node
    DOWN_SINCE = 15  #: s, when the node went down (-1 while it is not down)
    DOWN_S = 16  #: down time since the warm-up ended (closed intervals), s


class NI(IntEnum):
    """Rows of `nodes_i` (int64[len(NI), node rows])."""

    NODE_TYPE = 0
    STATUS = 1  #: a `NodeStatus`
    EPOCH = 2  #: bumped at every fail, recover and release (older node events are stale)
    JOB_HEAD = 3  #: first job of the node's list of running jobs (with faults), or -1
    FAILS = 4  #: 1: the node's type has a random failure model (`fault_draws` row)
    UP_POS = 5  #: next unused up-time draw of the node's row of `fault_draws`
    DOWN_POS = 6  #: next unused down-time draw


class NodeStatus(IntEnum):
    """A node row's lifecycle: unused row -> booting -> up -> released; an up node may
    go down (failed) and come back up, or drain (no new placements) and then be released."""

    UNUSED = 0
    BOOTING = 1
    UP = 2
    RELEASED = 3
    DOWN = 4  #: failed: takes no placement, comes back empty (still billed when rented)
    DRAINING = 5  #: takes no new placement; released when its last job leaves


class FX(IntEnum):
    """Columns of `fit_index` (float64[2 * L, len(FX)], L a power of two >= node rows; the
    first 3 columns only when no node type has GPUs): a segment tree over node rows
    (`clusteremu.cluster.fit_index`). Row L + k is node row k, row i the
    most of each column over rows 2i and 2i + 1, row 1 the root. A node row that is not up
    (and a padding row) holds -inf everywhere: it takes no placement."""

    CPU = 0  #: free cores
    MEM = 1  #: free GB
    SLOTS = 2  #: free worker slots
    GPU_SHARE = 3  #: most free milli-GPU on one of the node's GPUs
    GPU_WHOLE = 4  #: the node's wholly free GPUs


class PF(IntEnum):
    """Rows of `pools_f`."""

    CORES = 0
    SPEED = 1
    LAST = 2  #: time of the last advance, s
    NEXT_T = 3  #: next completion, s
    ALLOCATED = 4  #: cores allocated
    BUSY_AREA = 5  #: integral of allocated cores over the window, core-seconds
    PRICE_PER_S = 6


class PI(IntEnum):
    """Rows of `pools_i`."""

    HEAD = 0
    TAIL = 1
    COUNT = 2
    NEXT_J = 3  #: job of the next completion, or -1
    NEED_ALLOC = 4


class CF(IntEnum):
    """Rows of `classes_f`."""

    HOLDING_COST = 0
    SP_PARAM = 1
    TIMEOUT_S = 2
    SP_PARAM2 = 3


class CI(IntEnum):
    """Rows of `classes_i`."""

    SP_KIND = 0
    POOL = 1
    SP_NPTS = 2


class IS(IntEnum):
    """Entries of `istate` (int64 scalars)."""

    NEXT_ARRIVAL = 0
    HEAP_N = 1
    Q_HEAD = 2
    Q_TAIL = 3
    NEED_PLACE = 4
    DONE_COUNT = 5
    EVENTS = 6
    PLACER_CODE = 7
    ALLOC_CODE = 8
    STATUS_POOL = 9
    N_SYSTEM = 10
    DECISIONS = 11
    FAILED_COUNT = 12
    SCALER_CODE = 13
    NEED_SCALE = 14
    KILLED_COUNT = 15
    NODES_USED = 16  #: node rows handed out (the rest are unused, pre-allocated)
    PLACER_FCFS = 17  #: 1: the placer is strict FCFS (asked only when the head may move)
    N_WAITING = 18  #: with NEED_PLACE_DECISION: waiting jobs written to `members`
    DEC_N = 19  #: Python placements in `decisions` for the loop to apply first
    DEC_BAD = 20  #: index of the placement that could not be applied, or -1
    DEC_WHY = 21  #: why (`Refusal`)
    HAS_USAGE = 22  #: 1: jobs carry real usages (USE_* rows filled; OOM kills, stretching)
    CPU_RULE = 23  #: CPU under-provisioning: 0 none, 1 proportional (`clusteremu.cluster.usage`)
    RETRY_LIMIT = 24  #: attempts an out-of-memory job may be re-queued
    OOM_JOB = 25  #: with NEED_LIFT_DECISION: the job whose memory peak exceeded its request
    OOM_COUNT = 26  #: out-of-memory kills so far
    DROPPED_COUNT = 27  #: waiting jobs dropped unplaced (`Engine.drop`)
    LIFT_CODE = 28  #: 1: lift out-of-memory requests in the loop (`LiftRule`); 0: in Python
    FAULTS = 29  #: 1: node failures or timeline events (nodes keep lists of their jobs)
    ON_FAILURE = 30  #: what a node failure does to its jobs: 0 re-queue, 1 fail
    NODE_FAILURES = 31  #: node failures since the warm-up ended
    FAILURE_KILLS = 32  #: jobs killed by node failures (all jobs)
    TL_NEXT = 33  #: index of the next timeline event
    TL_EVENT = 34  #: with NEED_TIMELINE_ACTION: the timeline event Python carries out
    DRAW_NODE = 35  #: with NEED_FAULT_DRAWS: the node whose draws ran out
    DRAW_KIND = 36  #: ... and the event to schedule once refilled (`Event.FAIL`/`RECOVER`)
    HEAP_OVERFLOW = 37  #: 1: an event found no room in the heap (a bug: the engine raises)
    REDRAW = 38  #: 1: a job killed by a failure redoes freshly drawn work (`restart_work`)
    REDRAW_N = 39  #: with NEED_SIZE_REDRAWS: killed jobs (in `members`) to draw work for
    BAD_NODE = 40  #: with BAD_COMPILED_DECISION: the node the compiled placer chose
    SCALE_N = 41  #: with NEED_SCALE_ACTIONS: actions the compiled scaler wrote
    PLACER_ASK_ALWAYS = 42  #: 1: ask the Python placer even when no waiting job fits
    STATUS_CHANGES = 43  #: node status changes made by the loop (a placer's view rereads)
    PLACE_AFTER_TIES = 44  #: 1: ask the Python placer once every event of an instant is applied


class FS(IntEnum):
    """Entries of `fstate` (float64 scalars)."""

    NOW = 0
    WIN_START = 1
    WIN_END = 2
    HORIZON = 3
    BUSY_CPU = 4
    BUSY_AREA = 5
    MEASURED_TIME = 6
    LIFT_MULT = 7  #: compiled lift rule: next request >= LIFT_MULT x the request it hit
    LIFT_ADD_GB = 8  #: ... and >= that request + LIFT_ADD_GB
    #: cores: `fit_bits` marks the node rows that may fit a request of at least this many
    #: cores (`clusteremu.cluster.fit_index`, "free-node bits"); +inf before the first
    FIT_FLOOR = 9


class Event(IntEnum):
    """Kinds of heap entries; the id is a job, or a node for `NODE_READY`."""

    COMPLETE = 0
    NODE_READY = 1
    TIMER = 2
    OOM = 3  #: a running job's memory peak exceeds its request
    FAIL = 4  #: a node fails (random failure model); the node's epoch above KIND_BITS
    RECOVER = 5  #: a node comes back up (random failure model); epoch above KIND_BITS
    DRAW_UP = 6  #: a node's up-time draws ran out: Python refills them, then FAIL
    DRAW_DOWN = 7  #: a node's down-time draws ran out: Python refills them, then RECOVER


class Status(IntEnum):
    """What `run_kernel` returns."""

    FINISHED = 0
    NEED_PLACE_DECISION = 1
    NEED_ALLOC_DECISION = 2
    PAUSED = 3
    YIELDED = 4
    NEED_SCALE_DECISION = 5
    BAD_DECISION = 6  #: a Python placement could not be applied (see IS.DEC_BAD, DEC_WHY)
    NEED_LIFT_DECISION = 7  #: IS.OOM_JOB ran out of memory: the provisioner lifts its request
    NEED_TIMELINE_ACTION = 8  #: IS.TL_EVENT is due and Python carries it out (`join`)
    NEED_SIZE_REDRAWS = 10  #: IS.REDRAW_N re-queued jobs (in `members`) need new sizes
    NEED_FAULT_DRAWS = 9  #: IS.DRAW_NODE needs new up or down times (`Event.DRAW_UP`, ...)
    #: A compiled placer chose a node job IS.DEC_BAD cannot start on (IS.BAD_NODE, DEC_WHY).
    BAD_COMPILED_DECISION = 11
    #: A compiled allocator's cores for pool IS.STATUS_POOL were refused (IS.DEC_BAD: the
    #: job with no finite non-negative count, or -1: more than the pool's cores).
    BAD_ALLOCATION = 12
    NEED_SCALE_ACTIONS = 13  #: the compiled scaler wrote IS.SCALE_N actions (`scale_actions`)
    #: The Python placer's call raised, or returned more placements than `decisions` holds:
    #: the engine finishes the call outside the loop (`kernel.HANDED_BACK`).
    PLACER_HANDED_BACK = 14


class TL(IntEnum):
    """Rows of `timeline` (float64[len(TL), events]): the scenario's timeline, by time."""

    AT = 0  #: s
    ACTION = 1  #: an `Action`
    NODE = 2  #: node index, or -1 (then TYPE and COUNT)
    TYPE = 3  #: node type index, or -1
    COUNT = 4  #: nodes acted on
    CLS = 5  #: class index (set_rate, set_speedup), or -1
    P0 = 6  #: set_speedup: first parameter
    P1 = 7  #: set_speedup: second parameter


class Action(IntEnum):
    """Timeline actions (`docs/faults.md`)."""

    FAIL = 0
    RECOVER = 1
    JOIN = 2
    DRAIN = 3
    SET_RATE = 4
    SET_SPEEDUP = 5
    UNDRAIN = 6


class Refusal(IntEnum):
    """Why a placement could not be applied."""

    NONE = 0
    NOT_WAITING = 1
    NODE_NOT_UP = 2
    NO_ROOM = 3


#: Most actions a compiled scaler may write at one call (`scale_actions` columns).
SCALE_ACTIONS = 64

#: Milli-units per GPU.
GPU_MILLI = 1000
#: Most GPUs on one node (a job's GPUs are a bit mask in one int64).
MAX_GPUS_PER_NODE = 62
