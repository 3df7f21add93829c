import sys

import pytest


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run the real `jsbench` entry point in-process: returns (exit code, stdout, stderr)."""
    from jsbench.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "240")  # rich tables are not truncated in captured output

    def run(*args: str):
        monkeypatch.setattr(sys, "argv", ["jsbench", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def pytest_configure(config):
    # The embedded world's tensors are small: one intra-op thread is as fast, and on a loaded 2-core
    # machine torch's default threads oversubscribe the cores (seen: 100x slower sampling).
    import torch

    torch.set_num_threads(1)
