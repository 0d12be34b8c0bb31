"""The compiled event loop's rarer events (`clusteremu.cluster.kernel`).

Out-of-memory kills (and the compiled `LiftRule` that lifts a killed job's request), nodes
finishing start-up, node faults (docs/faults.md: random failures and recoveries drawn per
node, failures, recoveries and drains by the timeline) and the timeline's events. A loop
variant without the rarer events (`events=False`) compiles none of them but `node_up`.
"""

from __future__ import annotations

import math

from clusteremu.cluster.jit import inline_function, internal_function
from clusteremu.cluster.kernel_heap import KIND_BITS, heap_push
from clusteremu.cluster.kernel_jobs import (
    _live,
    advance_pool,
    apply_allocation,
    kill_job,
    release_node,
    set_status,
)
from clusteremu.cluster.layout import CF, FS, IS, JF, JI, NF, NI, TL, Action, Event, NodeStatus
from clusteremu.cluster.policies.compiled import holds_request

# --- out-of-memory kills ------------------------------------------------------------------


@inline_function
def on_oom(s, j: int, t: float) -> bool:  # type: ignore[no-untyped-def]
    """Running job j's memory peak exceeds its request: it is killed (its work is lost).

    Within its retry limit it waits again with a lifted request: the compiled `LiftRule`
    lifts it here when the provisioner has one and the queue has room; otherwise this
    returns True and the loop hands the job to Python (`NEED_LIFT_DECISION`), which kills
    and re-queues it. Past the limit, or at the rule's cap, it fails here. A lifted request
    that no node handed out so far could hold goes to Python too, which fails the job unless
    a node type the run may still rent holds it (it would wait forever otherwise).
    """
    s.jobs_i[JI.OOM_KILLS, j] += 1
    s.istate[IS.OOM_COUNT] += 1
    if s.jobs_i[JI.RETRIES, j] < s.istate[IS.RETRY_LIMIT]:
        # Room for its second queue entry behind every arrival still to come?
        room = s.istate[IS.Q_TAIL] + (s.jobs_f.shape[1] - s.istate[IS.NEXT_ARRIVAL]) < s.queue.size
        if s.istate[IS.LIFT_CODE] == 0 or not room:
            s.istate[IS.OOM_JOB] = j
            return True
        hit = s.jobs_f[JF.REQ_MEM, j]
        new = lifted_request(s, s.jobs_i[JI.CLS, j], hit)
        if new > hit:
            if not _some_node_holds(s, s.jobs_f[JF.REQ_CPU, j], new, s.jobs_f[JF.REQ_GPU, j]):
                s.istate[IS.OOM_JOB] = j
                return True
            kill_job(s, j, t, True)
            s.jobs_f[JF.REQ_MEM, j] = new
            return False
    kill_job(s, j, t, False)
    return False


@inline_function
def _some_node_holds(s, cpu: float, mem: float, gpu: float) -> bool:  # type: ignore[no-untyped-def]
    """Whether a node row handed out so far (any status) could hold the request when empty."""
    nodes_f = s.nodes_f
    for k in range(s.istate[IS.NODES_USED]):
        if holds_request(
            nodes_f[NF.CAP_CPU, k],
            nodes_f[NF.CAP_MEM, k],
            nodes_f[NF.CAP_GPU, k],
            nodes_f[NF.CAP_SLOTS, k],
            cpu,
            mem,
            gpu,
        ):
            return True
    return False


@inline_function
def lifted_request(s, c: int, hit: float) -> float:  # type: ignore[no-untyped-def]
    """The compiled `LiftRule`: the next memory request (GB) of class c after hitting `hit`
    GB (not above `hit` when its cap is reached)."""
    want = max(s.fstate[FS.LIFT_MULT] * hit, hit + s.fstate[FS.LIFT_ADD_GB])
    edges = s.lift_edges
    if c < edges.shape[0]:
        for e in range(1, edges.shape[1]):
            if edges[c, e] >= want:
                if edges[c, e] < math.inf:
                    want = edges[c, e]
                break
        want = min(want, edges[c, 0])
    return want


# --- nodes finishing start-up -------------------------------------------------------------


@inline_function
def node_up(s, k: int) -> bool:  # type: ignore[no-untyped-def]
    """A booting node finishes starting up and takes jobs (False: it was not booting)."""
    if s.nodes_i[NI.STATUS, k] != NodeStatus.BOOTING:
        return False
    set_status(s, k, NodeStatus.UP)
    if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
        s.istate[IS.NEED_PLACE] = 1
    s.istate[IS.NEED_SCALE] = 1
    return True


@inline_function
def on_node_ready(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """A rented node finishes starting up and takes jobs (its failures start counting)."""
    if node_up(s, k) and s.nodes_i[NI.FAILS, k] == 1:
        schedule_fault(s, k, t, Event.FAIL)


# --- node faults (docs/faults.md) ----------------------------------------------------------


@internal_function
def schedule_fault(s, k: int, t: float, kind: int) -> None:  # type: ignore[no-untyped-def]
    """Schedule node k's next random `Event.FAIL` (after an up time) or `Event.RECOVER`
    (after a down time) from its own draws; when they ran out, an `Event.DRAW_UP` /
    `DRAW_DOWN` now, on which Python refills them and calls this again."""
    half = s.fault_draws.shape[1] // 2
    epoch = s.nodes_i[NI.EPOCH, k] << KIND_BITS
    row = NI.UP_POS if kind == Event.FAIL else NI.DOWN_POS
    pos = s.nodes_i[row, k]
    if pos >= half:
        heap_push(s, t, k, (Event.DRAW_UP if kind == Event.FAIL else Event.DRAW_DOWN) | epoch)
        return
    s.nodes_i[row, k] = pos + 1
    d = s.fault_draws[k, pos if kind == Event.FAIL else half + pos]
    heap_push(s, t + d, k, kind | epoch)


@inline_function
def _make_queue_room(s) -> None:  # type: ignore[no-untyped-def]
    """Room at the queue's tail for one more entry: entries of jobs that left or were
    queued again are dropped (each job has at most one live entry, so this always frees
    room for a running job's new entry behind every arrival still to come)."""
    istate = s.istate
    if istate[IS.Q_TAIL] + 1 + (s.jobs_f.shape[1] - istate[IS.NEXT_ARRIVAL]) <= s.queue.size:
        return
    w = 0
    for h in range(istate[IS.Q_HEAD], istate[IS.Q_TAIL]):
        if _live(s, h):
            j = s.queue[h]
            s.queue[w] = j
            s.jobs_i[JI.QPOS, j] = w
            w += 1
    istate[IS.Q_HEAD] = 0
    istate[IS.Q_TAIL] = w


@inline_function
def _close_down_time(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Add node k's down time up to t (since the warm-up ended) to DOWN_S."""
    nodes_f = s.nodes_f
    lo = max(nodes_f[NF.DOWN_SINCE, k], nodes_f[NF.READY_AT, k], s.fstate[FS.WIN_START])
    if t > lo:
        nodes_f[NF.DOWN_S, k] += t - lo
    nodes_f[NF.DOWN_SINCE, k] = -1.0


@internal_function
def fail_node(s, k: int, t: float, random: bool) -> None:  # type: ignore[no-untyped-def]
    """Node k fails at t: the jobs running there are killed (their work is lost, counted
    as waste) and re-queued or failed (`IS.ON_FAILURE`); the node takes no placement until
    it recovers (after a random down time when `random`, else at a timeline `recover`)."""
    status = s.nodes_i[NI.STATUS, k]
    if status == NodeStatus.DOWN and not random:
        # Down after a random failure: the timeline takes it over, and it stays down
        # until the timeline's `recover` (its random repair goes stale).
        s.nodes_i[NI.EPOCH, k] += 1
        return
    if status != NodeStatus.UP and status != NodeStatus.DRAINING and status != NodeStatus.BOOTING:
        return
    if t >= s.fstate[FS.WIN_START]:
        s.istate[IS.NODE_FAILURES] += 1
    requeue = s.istate[IS.ON_FAILURE] == 0
    while s.nodes_i[NI.JOB_HEAD, k] >= 0:
        # The killed jobs join the queue in arrival order (their numbers): the earliest
        # first, whatever order they started in.
        j = s.nodes_i[NI.JOB_HEAD, k]
        other = s.jobs_i[JI.NEXT, j]
        while other >= 0:
            j = min(j, other)
            other = s.jobs_i[JI.NEXT, other]
        s.jobs_i[JI.FAIL_KILLS, j] += 1
        s.istate[IS.FAILURE_KILLS] += 1
        s.jobs_f[JF.LOST_CORE_S, j] += s.jobs_f[JF.REQ_CPU, j] * (t - s.jobs_f[JF.START, j])
        if requeue:
            _make_queue_room(s)
        kill_job(s, j, t, requeue)  # takes j off the node's list
        if requeue and s.istate[IS.REDRAW] == 1:  # Python draws its new work
            s.members[s.istate[IS.REDRAW_N]] = j
            s.istate[IS.REDRAW_N] += 1
    s.istate[IS.NEED_SCALE] = 1
    if s.nodes_i[NI.STATUS, k] == NodeStatus.RELEASED:
        return  # a draining node: its last job is gone, so it left
    s.nodes_i[NI.EPOCH, k] += 1
    if status == NodeStatus.DRAINING:
        release_node(s, k, t)
        return
    set_status(s, k, NodeStatus.DOWN)
    s.nodes_f[NF.DOWN_SINCE, k] = t
    if random and s.nodes_i[NI.FAILS, k] == 1:
        schedule_fault(s, k, t, Event.RECOVER)


@internal_function
def recover_node(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Down node k comes back at t, empty (booting still if its start-up is not over); with
    a failure model its next up time starts."""
    if s.nodes_i[NI.STATUS, k] != NodeStatus.DOWN:
        return
    _close_down_time(s, k, t)
    s.nodes_i[NI.EPOCH, k] += 1
    s.istate[IS.NEED_SCALE] = 1
    if s.nodes_f[NF.READY_AT, k] > t:
        set_status(s, k, NodeStatus.BOOTING)  # its NODE_READY event is still due
        return
    set_status(s, k, NodeStatus.UP)
    if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
        s.istate[IS.NEED_PLACE] = 1
    if s.nodes_i[NI.FAILS, k] == 1:
        schedule_fault(s, k, t, Event.FAIL)


@internal_function
def drain_node(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Node k takes no new placement from t; released when its last running job leaves
    (at once if it runs none, is down or still booting)."""
    status = s.nodes_i[NI.STATUS, k]
    if status == NodeStatus.DOWN:
        _close_down_time(s, k, t)
    elif status != NodeStatus.UP and status != NodeStatus.BOOTING:
        return
    if status == NodeStatus.UP and s.nodes_f[NF.RUNNING_JOBS, k] > 0:
        set_status(s, k, NodeStatus.DRAINING)
        s.istate[IS.NEED_SCALE] = 1
    else:
        release_node(s, k, t)


@internal_function
def undrain_node(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Draining node k takes placements again from t (a drain called off before the node
    ran empty; a node already released stays released)."""
    if s.nodes_i[NI.STATUS, k] != NodeStatus.DRAINING:
        return
    set_status(s, k, NodeStatus.UP)
    s.istate[IS.NEED_SCALE] = 1
    if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
        s.istate[IS.NEED_PLACE] = 1


@inline_function
def _acts_on(status: int, action: int) -> bool:
    """Whether a timeline action by type and count picks a node in this status."""
    if action == Action.RECOVER:
        return status == NodeStatus.DOWN
    if action == Action.UNDRAIN:
        return status == NodeStatus.DRAINING
    if action == Action.FAIL:
        return (
            status == NodeStatus.UP or status == NodeStatus.DRAINING or status == NodeStatus.BOOTING
        )
    return status == NodeStatus.UP  # a drain by type takes nodes that take placements


@inline_function
def _node_action(s, k: int, action: int, t: float) -> None:  # type: ignore[no-untyped-def]
    if action == Action.FAIL:
        fail_node(s, k, t, False)
    elif action == Action.RECOVER:
        recover_node(s, k, t)
    elif action == Action.UNDRAIN:
        undrain_node(s, k, t)
    else:
        drain_node(s, k, t)


@internal_function
def on_timeline(s, e: int, t: float) -> bool:  # type: ignore[no-untyped-def]
    """Timeline event e at t: fail, recover or drain nodes, or set a class's speed-up
    (pools are brought up to t and their rates follow; placed jobs started from now on
    use it). Returns True when Python carries it out (`join` rents nodes)."""
    tl = s.timeline
    action = int(tl[TL.ACTION, e])
    if action == Action.JOIN:
        s.istate[IS.TL_EVENT] = e
        return True
    if action == Action.SET_RATE:
        return False  # arrivals are drawn before the run, with the new rate from at_s
    if action == Action.SET_SPEEDUP:
        c = int(tl[TL.CLS, e])
        s.classes_f[CF.SP_PARAM, c] = tl[TL.P0, e]
        if not math.isnan(tl[TL.P1, e]):
            s.classes_f[CF.SP_PARAM2, c] = tl[TL.P1, e]
        for p in range(s.pools_f.shape[1]):
            advance_pool(s, p, t)
            apply_allocation(s, p, t)
        return False
    node = int(tl[TL.NODE, e])
    if node >= 0:
        if node < s.istate[IS.NODES_USED]:
            _node_action(s, node, action, t)
        return False
    left = int(tl[TL.COUNT, e])
    typ = int(tl[TL.TYPE, e])
    for k in range(s.istate[IS.NODES_USED]):
        if left <= 0:
            break
        if s.nodes_i[NI.NODE_TYPE, k] == typ and _acts_on(s.nodes_i[NI.STATUS, k], action):
            _node_action(s, k, action, t)
            left -= 1
    return False
