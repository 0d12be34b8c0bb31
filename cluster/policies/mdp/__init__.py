"""Learned speed-up MDP (the MDP paper: Bodas, Dorsman, Mandjes and Ravner, "Dynamic Core
Allocation for Malleable Jobs with Unknown Speed-up Parameters"; formulas in docs/mdp.md).

- `model`: the two-class malleable-job model (k cores, Poisson arrivals, exponential sizes,
  Amdahl speed-ups with parameters theta_j, truncation B) and its validation.
- `solver`: uniformised average-cost relative value iteration (Algorithm 2) -> policy table.
- `estimator`: maximum likelihood of theta_j from state-dependent departure rates (eq. 3.2-3.6).
- `allocator`: the `mdp` allocator, which reads a policy table and can record what the
  estimator needs.
- `learner`: Algorithms 1a / 1b and the non-stationary (change-point) mode.

Submodules are imported explicitly (`from clusteremu.cluster.policies.mdp.solver import solve`);
this
package file imports nothing so that the compiled allocator can be loaded by the engine
without pulling in scipy.
"""
