"""What the MindSpore backend's modules share about it, in a leaf they all import (it imports
nothing of opgen but the runtime's :data:`~opgen.runtime.mindspore.TARGET`): the backend package
(its ``BACKEND``), its build and test runner read these, so none of them imports another for them.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...runtime.mindspore import TARGET as TARGET  # the runtime reads it where opgen is not installed

TEST_PATHS: Mapping[str, str] = {"custom-graph": "graph", "custom-pynative": "pynat", "function": "func"}
"""The paths ``opgen test`` checks each op on, each with its short name in the results table
(:attr:`opgen.backends.Backend.test_paths`)."""
