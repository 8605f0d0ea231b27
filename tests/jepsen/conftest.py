"""pytest's hooks for the fault harness's tests: as the end-to-end tests,
a passing run leaves no temporary folder behind (tests/e2e/conftest.py).
The harness itself removes each run's data directories."""

from harness import e2e


def pytest_sessionfinish(session, exitstatus):
    e2e.remove_basetemp_if_passed(session, exitstatus)
