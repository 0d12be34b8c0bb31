"""The timeline's actions are one table: the scenario schema's event fields
(`EventModel`, after `at_s`) and the compiled loop's codes (`layout.Action`) name the same
actions in the same order, and every action a scenario may name encodes into the
timeline's rows (`faults.timeline_array`) as its code."""

from __future__ import annotations

import pytest

from clusteremu.cluster.faults import timeline_array
from clusteremu.cluster.layout import TL, Action
from clusteremu.scenarios.loader import spec_from_dict
from clusteremu.scenarios.schema import EVENT_ACTIONS
from tests.builders import node_scenario


def test_the_schema_and_the_loop_name_the_same_actions() -> None:
    assert tuple(a.name.lower() for a in Action) == EVENT_ACTIONS
    assert [int(a) for a in Action] == list(range(len(Action)))


def _body(action: str) -> dict[str, object]:
    if action == "join":
        return {"type": "n"}
    if action == "set_rate":
        return {"class": "a", "rate_per_s": 0.1}
    if action == "set_speedup":
        return {"class": "a", "speedup": {"kind": "linear"}}
    return {"node": 0}


@pytest.mark.parametrize("action", EVENT_ACTIONS)
def test_each_action_encodes_as_its_code(action: str) -> None:
    data = node_scenario(nodes=2).arrivals(0.2).jobs(20).build()
    data["events"] = [{"at_s": 1.0, action: _body(action)}]
    spec = spec_from_dict(data)
    rows = timeline_array(spec)
    assert rows.shape[1] == 1 and rows[TL.ACTION, 0] == Action[action.upper()]
