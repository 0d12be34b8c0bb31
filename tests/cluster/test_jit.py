"""numba plumbing: the per-job columns kernel."""

from __future__ import annotations

import numpy as np

from clusteremu.cluster.layout import JF, JI, JobState
from clusteremu.cluster.metrics import _job_columns


def test_job_columns_of_each_kind_of_job() -> None:
    """Not arrived, done on a node, running (held up to now), on a node without cores
    (its whole price), in a pool (its own core-seconds and cost), failed unplaced."""
    n = 6
    jobs_f = np.zeros((len(JF), n))
    jobs_i = np.zeros((len(JI), n), dtype=np.int64)
    state = [JobState.FUTURE, JobState.DONE, JobState.RUNNING, JobState.DONE, JobState.DONE]
    jobs_i[JI.STATE] = [*state, JobState.FAILED]
    jobs_i[JI.CLS] = [0, 0, 0, 0, 1, 0]
    jobs_i[JI.NODE] = [-1, 0, 0, 1, -1, -1]
    jobs_f[JF.ARRIVAL] = [9.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    jobs_f[JF.START] = [0.0, 1.0, 2.0, 3.0, 4.0, 0.0]
    jobs_f[JF.END] = [0.0, 3.0, 0.0, 5.0, 7.0, 0.0]
    jobs_f[JF.REQ_CPU] = [1.0, 2.0, 1.0, 1.0, 0.0, 1.0]
    jobs_f[JF.CORE_SECONDS, 4] = 6.0
    jobs_f[JF.COST, 4] = 0.5
    class_pool = np.array([-1, 0])
    cap_cpu = np.array([4.0, 0.0])
    price_per_s = np.array([0.4, 0.1])
    start, end, node, pool, core_s, cost, measured, failed = _job_columns(
        jobs_f, jobs_i, class_pool, cap_cpu, price_per_s, 6.0, True, 2.5, 0
    )
    np.testing.assert_array_equal(start, [np.nan, 1.0, 2.0, 3.0, 4.0, np.nan])
    np.testing.assert_array_equal(end, [np.nan, 3.0, np.nan, 5.0, 7.0, np.nan])
    assert node.tolist() == [-1, 0, 0, 1, -1, -1]
    assert pool.tolist() == [-1, -1, -1, -1, 0, -1]
    np.testing.assert_allclose(core_s, [0.0, 4.0, 4.0, 2.0, 6.0, 0.0])
    # price * held * (cores / node cores); a node without cores: its whole price
    np.testing.assert_allclose(cost, [0.0, 0.4 * 2 * 0.5, 0.4 * 4 * 0.25, 0.1 * 2, 0.5, 0.0])
    assert measured.tolist() == [False, False, False, True, True, False]
    assert failed.tolist() == [False, False, False, False, False, True]


def test_prefetch_is_a_hint_on_int_and_float_tables() -> None:
    """`prefetch` compiles for the engine's int and float tables (one declaration of the
    LLVM intrinsic serves both), emits `llvm.prefetch`, and changes nothing it touches."""
    from numba import njit

    from clusteremu.cluster.jit import prefetch

    @njit
    def read_after_hint(f: np.ndarray, i: np.ndarray, j: int) -> float:
        prefetch(i, 1, j)
        prefetch(f, 0, j)
        return f[0, j] + i[1, j]

    f = np.arange(6.0).reshape(2, 3)
    i = np.arange(6).reshape(2, 3)
    assert read_after_hint(f, i, 2) == 2.0 + 5
    assert np.array_equal(f, np.arange(6.0).reshape(2, 3))
    ir = read_after_hint.inspect_llvm(read_after_hint.signatures[0])
    assert ir.count("call void @llvm.prefetch") == 2
