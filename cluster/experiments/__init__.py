"""Experiment drivers: code that runs an engine through its API to learn or measure
something (not a policy, not a tuner)."""
