"""`commands.encode` on a recording stand-in for wgpu: the state a pass already holds is not set again,
and with timestamps each dispatch gets a pass of its own."""

from __future__ import annotations

from onyxia.runtime.commands import ComputePass, CopyCommand, DispatchCommand, Program, encode


class _Pass:
    """A compute pass that records its calls."""

    def __init__(self, calls: list[tuple[object, ...]]) -> None:
        self.calls = calls

    def __getattr__(self, name: str) -> object:
        return lambda *args: self.calls.append((name, *args))


class _Encoder(_Pass):
    def begin_compute_pass(self, **timestamp_writes: object) -> _Pass:
        self.calls.append(("begin_compute_pass", *timestamp_writes.values()))
        return _Pass(self.calls)


A, B, G1, G2 = "pipeline a", "pipeline b", "group 1", "group 2"


def _program() -> Program:
    return Program(
        segments=[
            ComputePass(
                [
                    DispatchCommand(A, G1, None, b"\x01", 1, 4, 1, 1),
                    DispatchCommand(A, G1, None, b"\x01", 1, 8, 1, 1),
                    DispatchCommand(A, G2, None, b"\x02", 1, 1, 1, 1),
                ]
            ),
            CopyCommand("src", 0, "dst", 0, 16),
            ComputePass(
                [DispatchCommand(A, G2, None, b"\x02", 1, 1, 1, 1), DispatchCommand(B, G2, None, b"\x02", 1, 2, 1, 1)]
            ),
        ],
        dispatches=5,
    )


def test_encode_skips_state_the_pass_already_holds() -> None:
    a, b, g1, g2 = A, B, G1, G2
    calls: list[tuple[object, ...]] = []
    encode(_Encoder(calls), _program())
    assert calls == [
        ("begin_compute_pass",),
        ("set_pipeline", a),
        ("set_bind_group", 0, g1),
        ("set_immediates", 0, b"\x01", 0, 1),
        ("dispatch_workgroups", 4, 1, 1),
        ("dispatch_workgroups", 8, 1, 1),  # same pipeline, group and immediates: nothing set again
        ("set_bind_group", 0, g2),
        ("set_immediates", 0, b"\x02", 0, 1),
        ("dispatch_workgroups", 1, 1, 1),
        ("end",),
        ("copy_buffer_to_buffer", "src", 0, "dst", 0, 16),
        ("begin_compute_pass",),  # a new pass holds no state
        ("set_pipeline", a),
        ("set_bind_group", 0, g2),
        ("set_immediates", 0, b"\x02", 0, 1),
        ("dispatch_workgroups", 1, 1, 1),
        ("set_pipeline", b),  # immediates are set again after a pipeline change
        ("set_immediates", 0, b"\x02", 0, 1),
        ("dispatch_workgroups", 2, 1, 1),
        ("end",),
    ]


def test_encode_with_timestamps_gives_each_dispatch_a_pass_of_its_own() -> None:
    calls: list[tuple[object, ...]] = []
    encode(_Encoder(calls), _program(), timestamps=lambda index: {"index": index})
    passes = [call for call in calls if call[0] == "begin_compute_pass"]
    assert passes == [("begin_compute_pass", {"index": i}) for i in range(5)]
    dispatch = ["set_pipeline", "set_bind_group", "set_immediates", "dispatch_workgroups", "end"]
    # every pass sets its state anew; the copy stays between the passes of its neighbours
    assert [call[0] for call in calls] == [
        *(["begin_compute_pass", *dispatch] * 3),
        "copy_buffer_to_buffer",
        *(["begin_compute_pass", *dispatch] * 2),
    ]
