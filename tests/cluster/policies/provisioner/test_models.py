"""Exported classifiers predict exactly as scikit-learn's, and survive JSON; sizing model
files that are truncated or of another version are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cluster.policies.provisioner.models import ExportedClassifier, export
from cluster.policies.provisioner.sizing import Sizing

sklearn = pytest.importorskip("sklearn")


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("kind", ["gbt", "svm"])
def test_exported_models_predict_like_scikit_learn(kind: str, classes: int) -> None:
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.svm import SVC

    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 4))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
    if classes == 3:
        y = y + (x[:, 2] > 0.7)
    model = (
        GradientBoostingClassifier(n_estimators=25, random_state=0)
        if kind == "gbt"
        else SVC(C=3.0, gamma=0.4, decision_function_shape="ovo")
    ).fit(x, y)
    exported = export(model, np.zeros(4), np.ones(4), x)
    again = ExportedClassifier.from_json(json.loads(json.dumps(exported.to_json())))
    probe = rng.normal(size=(500, 4))
    assert np.array_equal(again.predict(probe), model.predict(probe))


def test_a_truncated_or_foreign_model_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sizing.json"
    path.write_text('{"format": "clusteremu-sizing", "version": 1, "tasks": {')
    with pytest.raises(ValueError, match="not valid JSON"):
        Sizing.load(path)
    path.write_text(json.dumps({"format": "clusteremu-sizing", "version": 99, "tasks": {}}))
    with pytest.raises(ValueError, match="version 99"):
        Sizing.load(path)
    path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not a clusteremu sizing model"):
        Sizing.load(path)
    with pytest.raises(ValueError, match="cannot be read"):
        Sizing.load(tmp_path / "missing.json")
