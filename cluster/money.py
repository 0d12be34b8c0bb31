"""Per-job money and SLO loss of a run (the Pennyworth paper; any scenario with `slo:`).

Node money is what `metrics.node_money` sums: a node's start-up cost once, plus its price
from ready to release. Each job carries a share of its node's money, so that the shares
add up to what the nodes that ran jobs cost:

- `startup_usd`: the node's start-up cost split evenly among the jobs it ran;
- `operating_usd`: the node's operating cost split in proportion to the jobs' run times
  (end − start, seconds) on it;
- `slo_loss_usd`: the job's share of the scenario's SLO loss (`clusteremu.cluster.slo.job_losses`):
  its own term for `max` and `rtpt`; for `avg` and `percentile` its batch's loss (a batch:
  the jobs that arrived at one instant) split evenly over the batch.

A job's response time for the SLO is end − arrival, less the time it waited for its node
to boot (the overlap of [arrival, start] with the node's [rented, ready] interval) unless
the SLO counts start-up delays (`count_startup_delay: true`): so a batch planned at time 0
on fresh VMs gets exactly the response times of the Pennyworth paper's eq. 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import NF, NI, NodeStatus
from clusteremu.cluster.slo import Slo, job_losses

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def money_by_node(
    nodes_f: FloatArray, nodes_i: IntArray, now_s: float
) -> tuple[FloatArray, FloatArray]:
    """(start-up, operating) dollars of each node row: its start-up cost once, plus its
    price from ready to release (or `now_s`); 0 for rows never handed out."""
    held = nodes_i[NI.STATUS] != NodeStatus.UNUSED
    until = np.minimum(nodes_f[NF.RELEASED_AT], now_s)
    active = np.maximum(until - nodes_f[NF.READY_AT], 0.0)
    operating = np.where(held, nodes_f[NF.PRICE_PER_S] * active, 0.0)
    startup = np.where(held, nodes_f[NF.STARTUP_COST], 0.0)
    return startup, operating


def job_money(
    nodes_f: FloatArray,
    nodes_i: IntArray,
    now_s: float,
    node: npt.NDArray[np.integer[Any]],
    start_s: FloatArray,
    end_s: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """(startup_usd, operating_usd) per job: its shares of its node's money (0 for jobs
    never placed on a node)."""
    n_nodes = nodes_f.shape[1]
    startup, operating = money_by_node(nodes_f, nodes_i, now_s)
    on = np.asarray(node) >= 0
    k = np.asarray(node)[on].astype(np.int64)
    ran = np.where(np.isnan(end_s), now_s, end_s) - start_s
    ran = np.where(on, np.maximum(np.nan_to_num(ran), 0.0), 0.0)
    jobs_per_node = np.bincount(k, minlength=n_nodes).astype(np.float64)
    time_per_node = np.bincount(k, weights=ran[on], minlength=n_nodes)
    out_startup = np.zeros(node.size)
    out_operating = np.zeros(node.size)
    out_startup[on] = startup[k] / jobs_per_node[k]
    share = np.where(
        time_per_node[k] > 0,
        ran[on] / np.where(time_per_node[k] > 0, time_per_node[k], 1.0),
        1.0 / jobs_per_node[k],
    )
    out_operating[on] = operating[k] * share
    return out_startup, out_operating


def slo_response_s(
    spec: Any,
    nodes_f: FloatArray,
    node: npt.NDArray[np.integer[Any]],
    arrival_s: FloatArray,
    start_s: FloatArray,
    end_s: FloatArray,
) -> FloatArray:
    """Each job's response time as the SLO counts it (seconds; see the module doc)."""
    response = end_s - arrival_s
    if spec.slo is None or spec.slo.count_startup_delay:
        return response
    on = np.asarray(node) >= 0
    k = np.where(on, node, 0).astype(np.int64)
    rented = nodes_f[NF.RENTED_AT, k]
    ready = nodes_f[NF.READY_AT, k]
    waited = np.minimum(start_s, ready) - np.maximum(arrival_s, rented)
    waited = np.where(on & np.isfinite(waited), np.maximum(waited, 0.0), 0.0)
    return response - waited


def task_means(spec: Any, class_index: IntArray, node_type: IntArray) -> FloatArray:
    """Each job's task mean run time (seconds), for the `rtpt` SLO: the class's mean on its
    node's type, or on the SLO's `reference_type` when it names one
    (`JobClass.mean_runtime_on`)."""
    reference = getattr(spec.slo, "reference_type", None) if spec.slo is not None else None
    table = np.full((len(spec.classes), max(len(spec.node_types), 1)), math.nan)
    for c, jc in enumerate(spec.classes):
        for t, nt in enumerate(spec.node_types):
            table[c, t] = jc.mean_runtime_on(reference if reference is not None else nt.name)
    out = np.full(class_index.size, math.nan)
    on = node_type >= 0
    out[on] = table[class_index[on], node_type[on]]
    return out


def slo_losses(
    spec: Any,
    nodes_f: FloatArray,
    nodes_i: IntArray,
    class_index: IntArray,
    node: npt.NDArray[np.integer[Any]],
    arrival_s: FloatArray,
    start_s: FloatArray,
    end_s: FloatArray,
    measured: npt.NDArray[np.bool_],
) -> FloatArray:
    """Each measured job's share of the SLO loss (dollars; 0 elsewhere and without `slo:`).

    `avg` and `percentile` judge each batch on its own — the measured jobs that arrived at
    one instant, as a Pennyworth placer plans them — and split its loss over its jobs.
    """
    out = np.zeros(class_index.size)
    if spec.slo is None or not measured.any():
        return out
    r = slo_response_s(spec, nodes_f, node, arrival_s, start_s, end_s)[measured]
    types = np.where(node >= 0, nodes_i[NI.NODE_TYPE, np.where(node >= 0, node, 0)], -1)
    means = task_means(spec, class_index[measured], types[measured].astype(np.int64))
    if spec.slo.per_job:
        out[measured] = job_losses(spec.slo, r, means)
        return out
    _, batch = np.unique(arrival_s[measured], return_inverse=True)
    out[measured] = batch_losses(spec.slo, r, batch.ravel())
    return out


def batch_losses(slo: Slo, response_s: FloatArray, batch: IntArray) -> FloatArray:
    """Each job's share of its batch's `avg` or `percentile` loss (dollars): the loss of
    the batch's response times (`Slo.loss`), split evenly over its jobs. `batch`: each
    job's batch number, 0 .. B - 1."""
    n = np.bincount(batch).astype(np.float64)
    if slo.kind == "avg":
        judged = np.bincount(batch, weights=response_s) / n
    else:  # the ceil(p / 100 x n)-th smallest response time of each batch
        order = np.lexsort((response_s, batch))
        first = np.concatenate(([0], np.cumsum(n)[:-1])).astype(np.int64)
        rank = np.minimum(n, np.maximum(1.0, np.ceil(slo.percentile / 100.0 * n - 1e-12)))
        judged = response_s[order][first + rank.astype(np.int64) - 1]
    loss = slo.penalty_per_s * np.maximum(judged - slo.target_s, 0.0)
    return (loss / n)[batch]
