"""Provisioners that size each task instance's request (seed 002): `grouped`, `vpa`,
`predictive` (`static` lives in `cluster.policies.fifo`). scikit-learn, imbalanced-learn
and Optuna are imported only when a model is trained (the `learn` extra)."""

from cluster.policies.provisioner import policies as policies  # registers them
