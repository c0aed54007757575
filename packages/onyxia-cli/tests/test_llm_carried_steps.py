"""`CarriedSteps` moves a run of pipelined decode steps' feeds on in place: every step's feeds and dims must
equal what `step_feeds` builds from the rows' slots and cached lengths (the batch's one implementation of a
run's inputs), over runs of steps with rows of different lengths and slots in any order. The session and slot
table are stand-ins that record what is submitted; test_llm_batch checks the tokens on real models."""

from __future__ import annotations

from typing import Any

import numpy as np

from onyxia.cli.llm.carried_steps import CarriedSteps
from onyxia.cli.llm.sampling import SamplingParams
from onyxia.cli.llm.step_inputs import Row, step_feeds


class _Signature:
    input_ids, attention_mask, position_ids = "input_ids", "attention_mask", "position_ids"


class _Dims:
    resident = last_rows = True

    def __call__(self, count: int, past: int, batch: int = 1) -> dict[str, int]:
        return {"count": count, "past": past, "batch": batch}


class _Executor:
    input_names: list[str] = []  # no log-probability rows in this plan
    dims: dict[str, int] = {}

    def update_dimensions(self, dims: dict[str, int]) -> None:
        self.bound = dims


class _Session:
    signature, step_dims, max_length = _Signature(), _Dims(), 128

    def __init__(self) -> None:
        self.executor = _Executor()
        self.sampling: list[np.ndarray] = []

    def set_sampling(self, values: np.ndarray) -> None:
        self.sampling.append(values.copy())

    def _run(self, feeds: dict[str, np.ndarray], wanted: list[str]) -> None:
        self.feeds = {name: array.copy() for name, array in feeds.items()}


class _Stream:
    def __init__(self, slot: int, params: SamplingParams) -> None:
        self.slot, self.params, self.logprobs = slot, params, None
        self.rng = np.random.default_rng(slot)


class _Slots:
    def __init__(self, lengths: dict[int, int]) -> None:
        self.lengths = lengths

    def rows(self, streams: list[Any]) -> list[Row]:
        return [Row(s.slot, self.lengths[s.slot]) for s in streams]


def test_each_carried_step_feeds_what_step_feeds_builds_for_its_rows() -> None:
    rng = np.random.default_rng(0)
    for _ in range(40):
        count = int(rng.integers(1, 9))
        slots = [int(s) for s in rng.permutation(8)[:count]]
        lengths = {slot: int(rng.integers(1, 60)) for slot in slots}
        session, table = _Session(), _Slots(lengths)
        carried = CarriedSteps(session, table)  # type: ignore[arg-type]
        streams = [_Stream(slot, SamplingParams()) for slot in slots]
        for step in range(int(rng.integers(1, 12))):
            carried.submit(streams)  # type: ignore[arg-type]
            rows = [Row(slot, lengths[slot] + step) for slot in slots]
            feeds, dims = step_feeds(_Signature(), rows, [[0]] * count, 1, _Dims())  # type: ignore[arg-type]
            del feeds[_Signature.input_ids]  # a carried step's ids come from the GPU
            assert session.executor.bound == dims
            assert session.feeds.keys() == feeds.keys()
            for name, expected in feeds.items():
                got = session.feeds[name]
                assert got.dtype == expected.dtype and got.shape == expected.shape, name
                np.testing.assert_array_equal(got, expected, err_msg=name)


def test_sampling_rows_draw_in_row_order_and_greedy_rows_stay_zero() -> None:
    params = [SamplingParams(), SamplingParams(temperature=0.7, top_k=5, seed=1), SamplingParams()]
    session = _Session()
    carried = CarriedSteps(session, _Slots({0: 3, 1: 3, 2: 3}))  # type: ignore[arg-type]
    streams = [_Stream(slot, p) for slot, p in enumerate(params)]
    reference = np.random.default_rng(1)  # stream 1's generator, seeded as its stream's
    for _ in range(3):
        carried.submit(streams)  # type: ignore[arg-type]
        draws = session.sampling[-1]
        assert not draws[0].any() and not draws[2].any()
        u = float(np.float32(reference.random()))
        np.testing.assert_array_equal(draws[1], np.array([0.7, 5, u], np.float32))
