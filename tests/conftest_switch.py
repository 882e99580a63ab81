"""pytest plugin: `from conftest import NAME` in a test module means the
conftest.py of that module's own directory.

The test directories are not packages, so every conftest.py is imported
under the one module name "conftest" and sys.modules keeps whichever was
loaded last: with several directories on the command line (or a lazy
import in a fixture) a module got another directory's helpers. Before each
test module is imported, point "conftest" at its directory's conftest."""

import sys
from pathlib import Path

import pytest


def _conftest_of(config, directory: Path):
    for plugin in config.pluginmanager.get_plugins():
        f = getattr(plugin, "__file__", None)
        if f and Path(f).name == "conftest.py" and Path(f).parent == directory:
            return plugin
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collectstart(collector):
    if isinstance(collector, pytest.Module):
        mod = _conftest_of(collector.config, collector.path.parent)
        if mod is not None:
            sys.modules["conftest"] = mod
