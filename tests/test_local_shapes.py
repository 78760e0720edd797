"""What the local server's pool views count, in-process: resource quantities as AIHC and
Kubernetes write them (job_chain/local/shapes.py)."""

from __future__ import annotations

from typing import Any

import pytest

from job_chain.aihc.timefmt import iso_utc
from job_chain.local import shapes
from job_chain.local.shapes import allocated, iso_time, quantity


@pytest.mark.parametrize("value, memory, expected", [
    (8, False, 8.0), ("1.1", False, 1.1), ("500m", False, 0.5), ("2k", False, 2000.0),  # cores
    (40, True, 40.0), ("16Gi", True, 16.0), ("512Mi", True, 0.5), ("2Ti", True, 2048.0),  # GiB
    ("16G", True, 16e9 / 2 ** 30), ("2M", True, 2e6 / 2 ** 30), ("1k", True, 1e3 / 2 ** 30),  # bytes
    ("x", False, 0.0), ("-1", False, 0.0), (True, False, 0.0), ("1e3", False, 0.0),  # refused at create
])
def test_a_quantity_in_every_form_the_create_rules_accept(value: Any, memory: bool, expected: float) -> None:
    assert quantity(value, memory) == pytest.approx(expected)


def test_allocated_counts_every_replica_of_every_active_job() -> None:
    jobs = [{"spec": {"jobSpec": {"replicas": 2, "resources": [{"name": "cpu", "quantity": "500m"},
                                                                {"name": "memory", "quantity": "16G"}]}}},
            {"spec": {"jobSpec": {"resources": [{"name": "cpu", "quantity": 3}, {"name": "memory", "quantity": 8},
                                                {"name": "baidu.com/a100_80g_cgpu", "quantity": 8}]}}}]
    assert allocated(jobs) == pytest.approx({"cpu": 4.0, "memoryGi": 2 * 16e9 / 2 ** 30 + 8})


def test_a_time_is_its_second_s_text_each_time_and_the_kept_texts_are_bounded() -> None:
    for ts in (1795940000.0, 1795940000.999, 1795940001.0001, 1.5, 86399.9999, 1795940000.5):
        assert iso_time(ts) == iso_time(ts) == iso_utc(ts)  # the fraction dropped, never rounded
    assert iso_time(1795940000.999) == "2026-11-29T08:13:20Z"
    assert iso_time(None) == iso_time(0) == iso_time(0.0) == ""
    for second in range(shapes.SECONDS_KEPT + 10):
        iso_time(1_700_000_000 + second)
    assert 0 < shapes._second_text.cache_info().currsize <= shapes.SECONDS_KEPT
    assert iso_time(1_700_000_000 + shapes.SECONDS_KEPT) == iso_utc(1_700_000_000 + shapes.SECONDS_KEPT)
