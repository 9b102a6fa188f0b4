"""pytest plugin (-p tap): one TAP-ish line per test for tests/run.sh.

run.sh counts lines "ok - NAME" / "not ok - NAME"; pytest's own terminal
output (dots without newlines) would break those lines, so run this with
`-p no:terminal` and the failures' text is printed here instead.
"""
import sys

_out = sys.__stdout__
_failed_setup = set()


def _say(line, text=""):
    _out.write(line + "\n")
    for t in text.splitlines():
        _out.write("#   " + t + "\n")
    _out.flush()


def pytest_collectreport(report):
    if report.failed:
        _say(f"not ok - py/collect {report.nodeid}", report.longreprtext)


def pytest_runtest_logreport(report):
    name = "py/" + report.nodeid.split("::", 1)[-1]
    if report.failed:
        if report.when != "teardown" or report.nodeid not in _failed_setup:
            _say(f"not ok - {name} ({report.when})", report.longreprtext)
        _failed_setup.add(report.nodeid)
    elif report.skipped and report.when in ("setup", "call"):
        _say(f"skip - {name}: {report.longrepr[-1] if isinstance(report.longrepr, tuple) else ''}")
    elif report.passed and report.when == "call":
        _say(f"ok - {name}")


def pytest_sessionfinish(session, exitstatus):
    _say(f"# pytest exit status {int(exitstatus)}")


def pytest_addoption(parser, pluginmanager):
    # The terminal plugin owns --verbose, yet pytest's report of a collection
    # error reads it: with that plugin off (-p no:terminal), an import error
    # in a test file shows up only as "no option named 'verbose'".
    if pluginmanager.is_blocked("terminal"):
        parser.addoption("--verbose", action="count", dest="verbose", default=0)
