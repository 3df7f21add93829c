"""jsbench: learn and benchmark instance-level sampling schedules for frozen text-to-image samplers."""

__version__ = "0.1.0"


class JsbenchError(Exception):
    """An error whose message is one line meant for the user (the CLI prints it and exits non-zero)."""
