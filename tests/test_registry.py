"""Registries find what a new module registers: adding a reward or a suite is adding one file."""

from __future__ import annotations

import sys
import textwrap

import pytest

import jsbench.rewards
import jsbench.suites
from jsbench import JsbenchError
from jsbench.registry import Registry


class Unknown(JsbenchError):
    pass


def _package(tmp_path, monkeypatch, name: str, files: dict[str, str]) -> str:
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("REG = None\n")
    for fname, body in files.items():
        (root / fname).write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_an_undeclared_module_registers_on_a_miss_and_private_modules_stay_unimported(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, "regpkg_a", {
        "alpha.py": "import regpkg_a\nregpkg_a.REG.register('a')(lambda: 'made a')\n",
        "_private.py": "raise RuntimeError('a private module must not be imported by the scan')\n",
    })
    import regpkg_a

    regpkg_a.REG = Registry("thing", Unknown, package=pkg)
    assert regpkg_a.REG.get("a")() == "made a"
    assert regpkg_a.REG.names() == ["a"]
    assert f"{pkg}._private" not in sys.modules


def test_an_unknown_name_is_one_line_naming_the_modules_that_did_not_import(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, "regpkg_b", {
        "alpha.py": "import regpkg_b\nregpkg_b.REG.register('a')(lambda: 1)\n",
        "broken.py": "import a_package_that_is_not_installed\n",
    })
    import regpkg_b

    regpkg_b.REG = Registry("thing", Unknown, package=pkg)
    with pytest.raises(Unknown) as info:
        regpkg_b.REG.get("b")
    message = str(info.value)
    assert "\n" not in message
    assert "unknown thing 'b'; choose one of: a" in message
    assert f"{pkg}.broken did not import: ModuleNotFoundError" in message


def test_a_declared_name_imports_only_its_module(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, "regpkg_c", {
        "alpha.py": "import regpkg_c\nregpkg_c.REG.register('a')(lambda: 1)\n",
        "beta.py": "raise RuntimeError('looking up a declared name must not import the other modules')\n",
    })
    import regpkg_c

    regpkg_c.REG = Registry("thing", Unknown, {"a": f"{pkg}.alpha"}, package=pkg)
    assert regpkg_c.REG.get("a")() == 1
    assert f"{pkg}.beta" not in sys.modules


# a new suite's file: its Suite class, declaring the protocol, registered itself (a new reward's: a factory)
_NEW_SUITE = '''from jsbench.suites import register_suite
from jsbench.suites.base import TASK_MEAN_RULE, Suite


@register_suite("extra_register_suite")
class Made(Suite):
    name, primary_metric, protocol_seeds, overall_rule = "extra_register_suite", "x", 1, TASK_MEAN_RULE

    def __init__(self, backbone=None, **options):
        self.made = ("made", backbone)

    def items(self, split="test"):
        return []

    def score(self, images, items):
        return []

    def aggregate(self, scores, items):
        return []
'''


@pytest.mark.parametrize("package, register, load", [
    (jsbench.suites, "register_suite", "load_suite"),
    (jsbench.rewards, "register_reward", "load_reward"),
])
def test_one_new_file_in_the_real_package_is_a_new_suite_or_reward(tmp_path, monkeypatch, package, register, load):
    """The suites and rewards packages themselves: a file dropped beside geneval.py, with no line anywhere
    else, is found by name (here the extra folder joins the package's path instead of writing into it)."""
    name = f"extra_{register}"
    (tmp_path / f"{name}.py").write_text(
        _NEW_SUITE if package is jsbench.suites else
        f"from {package.__name__} import {register}\n\n@{register}({name!r})\ndef make(backbone=None, **options):\n    return ('made', backbone)\n"
    )
    registry = package._REGISTRY
    registry.names()  # every real module imported and registered first: the copy below keeps them all
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_scanned", False)
    monkeypatch.setattr(registry, "factories", dict(registry.factories))
    monkeypatch.delitem(sys.modules, f"{package.__name__}.{name}", raising=False)
    assert name not in package._MODULES
    made = getattr(package, load)(name)
    assert (made.made if package is jsbench.suites else made) == ("made", None)
    assert name in registry.names()
    sys.modules.pop(f"{package.__name__}.{name}", None)
