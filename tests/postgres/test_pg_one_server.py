"""One PostgreSQL per run under pytest-xdist: every test that uses the server is in one
xdist_group (tests/conftest.py), and xdist's worker sees the mark (its nodeid carries it)."""

from __future__ import annotations

import pytest


def test_a_test_of_the_server_is_in_the_postgres_group(
    request: pytest.FixtureRequest, pg_server: object
) -> None:
    groups = {mark.args[0] for mark in request.node.iter_markers("xdist_group")}
    assert groups == {"postgres"}
    if hasattr(request.config, "workerinput") and request.config.getvalue("loadgroup"):
        # What the scheduler groups by: a mark added after xdist's worker read the marks
        # leaves the nodeid without it, and the test to any worker.
        assert request.node.nodeid.endswith("@postgres"), request.node.nodeid
