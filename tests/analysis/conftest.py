"""The default battery's mechanism model, shared by the modules that fit agents on it.

Building it and filling its lapse tables (every hypothesis at every screen rate) is a
deterministic computation of tens of seconds; each fitting module built its own. They now
share one per worker process, through the same on-disk cache a diagnosis reads
(diagym.analysis.diagnose.model_cache, checked equal to build_model by test_model_cache), and
each module writes the tables it filled there, so the other worker reads them too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from diagym.analysis.diagnose.battery import DEFAULT_BATTERY
from diagym.analysis.diagnose.likelihood import MechanismModel
from diagym.analysis.diagnose.model_cache import cached_model, save_lapse_tables


@pytest.fixture(scope="session")
def _default_model_of_the_session() -> MechanismModel:
    return cached_model(DEFAULT_BATTERY)


@pytest.fixture(scope="module")
def default_model(_default_model_of_the_session: MechanismModel) -> Iterator[MechanismModel]:
    yield _default_model_of_the_session
    save_lapse_tables(_default_model_of_the_session)
