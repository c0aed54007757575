"""Each package's own public pipeline, moved onto Onyxia by one import, against the same pipeline on
onnxruntime.

Per row of `pipelines.PIPELINES`: one fresh process runs the pipeline on onnxruntime, another runs it
after `sys.modules["onnxruntime"] = onyxia.ort` (the README's switch), each calling it once; strings,
labels, ints and bools must be equal, floats within the row's measured bound. The Onyxia process must
not have loaded the real onnxruntime, and must hold as many sessions as onnxruntime's did, so the
package really ran on the facade. Timing is the report's job (`pipelines_report.py`): one call per
engine keeps CI to one compile of each model (the driver's shader cache is already warm from
test_packaged_models.py).
"""

from __future__ import annotations

import pytest
from pipeline_runner import run_in_subprocess
from pipelines import PIPELINES, Pipeline, compare_fields


def test_rows_are_unique_and_cover_every_packaged_distribution() -> None:
    from packaged_table import PASSING

    names = [p.name for p in PIPELINES]
    assert len(names) == len(set(names)), "a pipeline is listed twice"
    assert {p.distribution for p in PIPELINES} == {m.distribution for m in PASSING}


def test_compare_reads_strings_exactly_and_floats_within_bound() -> None:
    row = Pipeline("row", "dist", "call()", lambda: lambda: None, dict, tols={"score": 1e-3})
    same = {"label": "python", "score": 0.5, "boxes": [[1, 2]]}
    assert compare_fields(row, same, dict(same)) == ([], 0.0)
    problems, worst = compare_fields(row, {**same, "score": 0.5005}, same)
    assert problems == [] and worst == pytest.approx(5e-4)
    problems, _ = compare_fields(row, {**same, "score": 0.502}, same)
    assert problems == ["score: 0.502, expected 0.5 (bound 0.001)"]
    problems, _ = compare_fields(row, {**same, "label": "pyth0n", "boxes": [[1, 3]]}, same)
    assert problems == ["label: 'pyth0n', expected 'python'", "boxes[0][1]: 3, expected 2"]
    problems, _ = compare_fields(row, {**same, "boxes": [[1, 2], [3, 4]]}, same)
    assert problems == ["boxes: 2 items, expected 1"]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: p.name)
def test_pipeline_on_onyxia_matches_onnxruntime(pipeline: Pipeline) -> None:
    expected = run_in_subprocess("onnxruntime", pipeline.name)
    got = run_in_subprocess("onyxia", pipeline.name)
    assert got.ort_modules == [], f"{pipeline.name}: the Onyxia process loaded onnxruntime ({got.ort_modules})"
    assert got.sessions == expected.sessions > 0, (
        f"{pipeline.name}: {got.sessions} onyxia.ort sessions, onnxruntime made {expected.sessions}"
    )
    problems, _worst = compare_fields(pipeline, got.result, expected.result)
    assert not problems, f"{pipeline.name} ({pipeline.call}) differs from onnxruntime:\n" + "\n".join(problems[:20])
