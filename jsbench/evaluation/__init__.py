"""Evaluation: a schedule source sampled on a suite's prompts x seeds and scored per image (evaluate.py), the
records made of it (results.py), one run filed (runs.py), images saved and schedules exported, and each suite's
real-model protocol. Above the zoo and the policy; below training, which evaluates its held-out curve here."""
