"""Every exporter fixture, every precision: greedy tokens and prefill logits equal onnxruntime's."""

import numpy as np
import pytest
from llm_cases import FIXTURES, Fixture, case_session, expected, fixture_id


@pytest.mark.parametrize("case", [c for c in FIXTURES if c.greedy], ids=fixture_id)
def test_greedy_tokens_match_onnxruntime(case: Fixture) -> None:
    llm = case_session(case)
    for prompt in expected(case.directory, case.expected)["prompts"]:
        llm.reset()
        got = list(llm.generate_ids(prompt["prompt_ids"], len(prompt["greedy_ids"])))
        assert got == prompt["greedy_ids"], f"prompt '{prompt['name']}'"


@pytest.mark.parametrize("case", FIXTURES, ids=fixture_id)
def test_prefill_logits_match_onnxruntime(case: Fixture) -> None:
    tolerance = case.tolerance
    llm = case_session(case)
    for prompt in expected(case.directory, case.expected)["prompts"]:
        llm.reset()
        logits = llm.next_token_logits(prompt["prompt_ids"])
        top5, ours = prompt["prefill_top5"], np.argsort(-logits, kind="stable")[:5]
        # the expected top-5 ids carry the expected values, and our own top 5 has the same values: ids may
        # only differ where two logits tie within the tolerance (f16 rounding makes exact ties)
        np.testing.assert_allclose(logits[top5["ids"]], top5["values"], atol=tolerance, rtol=0)
        np.testing.assert_allclose(logits[ours], top5["values"], atol=tolerance, rtol=0)
        differing = [i for i, (a, b) in enumerate(zip(ours, top5["ids"])) if a != b]
        assert all(abs(logits[ours[i]] - logits[top5["ids"][i]]) <= tolerance for i in differing), prompt["name"]
        np.testing.assert_allclose(
            logits.astype(np.float64).sum(), prompt["prefill_last_logits_sum"], atol=tolerance * logits.size
        )
