"""Provisioners that size each task instance's request (after Jialun Song's master's
thesis; docs/provisioner.md): `grouped`, `vpa`,
`predictive` (`static` lives in `clusteremu.cluster.policies.fifo`). scikit-learn, imbalanced-learn
and Optuna are imported only when a model is trained (the `learn` extra)."""

from clusteremu.cluster.policies.provisioner import policies as policies  # registers them
