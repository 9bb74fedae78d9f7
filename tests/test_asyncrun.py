"""Runs and target fills work from code that already runs an event loop (a notebook cell, Streamlit's own)."""
from __future__ import annotations

import asyncio
import threading

import pytest

from evaluators import Store, evaluate
from evaluators.core.asyncrun import run_to_end
from tests.conftest import SINGLE


def test_an_evaluation_inside_a_running_loop_equals_one_outside(tmp_path, new_store_url):
    plain = evaluate(SINGLE, ["f1_score"], store=Store(new_store_url("a"))).metrics

    async def notebook_cell():
        return evaluate(SINGLE, ["f1_score"], store=Store(new_store_url("b"))).metrics

    inside = asyncio.run(notebook_cell())
    assert inside["f1_score.f1_score"] == plain["f1_score.f1_score"] and inside["f1_score.scored_rows"] == 31


def test_inside_a_loop_the_coroutine_runs_in_a_thread_of_its_own_and_its_error_reaches_the_caller():
    async def where():
        return threading.current_thread().name

    async def fails():
        raise ValueError("from the coroutine")

    async def caller():
        with pytest.raises(ValueError, match="from the coroutine"):
            run_to_end(fails())
        return run_to_end(where())

    assert run_to_end(where()) == threading.current_thread().name  # no loop running: here
    assert asyncio.run(caller()) != threading.current_thread().name  # a loop running: another thread
