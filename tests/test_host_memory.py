"""`jsbench.host_memory`: the CLI asks glibc's malloc to keep freed memory for reuse (fewer page faults).

What a user relies on: it applies where glibc is the C library, and a user who configures malloc through the
environment keeps their own settings.
"""

from __future__ import annotations

import platform

import pytest

from jsbench.host_memory import retain_freed_host_memory


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_host_memory_settings_apply_on_glibc_and_leave_a_users_own_alone(monkeypatch):
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    assert retain_freed_host_memory() is True
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert retain_freed_host_memory() is False
