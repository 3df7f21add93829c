"""Studies of the benchmark itself, each the library behind a script under scripts/ or a command: the estimator
lab (gradient noise per reward baseline, its rendering, committed section and simulated checks), scorer
agreement, train/test overlap, sample efficiency, SE calibration, instance headroom, and what schedules cost
and how fast the worlds run. The top wing: it may import any other, and only the command line imports it."""
