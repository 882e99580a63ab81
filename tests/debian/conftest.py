"""tests/debian: the Debian packages (test_packages.py)."""

import pytest

REPORT: list[str] = []


@pytest.fixture
def report():
    """report(line): a line for the summary at the end of the run."""
    return REPORT.append


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("debian packages report")
        for line in REPORT:
            terminalreporter.write_line(line)
