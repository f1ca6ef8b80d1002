"""Experiment modules, one per seed; each registers its Experiment with vspin.reproduce.register."""
