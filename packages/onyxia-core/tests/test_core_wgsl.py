import pytest

from onyxia.core import ShaderError, ShaderLibrary, preprocess


def _lib(*modules: str) -> ShaderLibrary:
    lib = ShaderLibrary()
    for i, m in enumerate(modules):
        lib.add_module(m, origin=f"mod{i}.wgsl")
    return lib


def test_defs_select_branches() -> None:
    src = "#ifdef A\na\n#else\nnot_a\n#endif\n#if MODE == fast\nfast\n#else\nslow\n#endif\n#ifndef B\nno_b\n#endif"
    out = preprocess(src, {"A": True, "MODE": "fast"}, "t").split()
    assert out == ["a", "fast", "no_b"]
    out = preprocess(src, {"MODE": "slow", "B": 1}, "t").split()
    assert out == ["not_a", "slow"]


def test_nested_conditions() -> None:
    src = "#ifdef A\n#ifdef B\nab\n#else\na_only\n#endif\n#endif"
    assert preprocess(src, {"A": 1}, "t").split() == ["a_only"]
    assert preprocess(src, {"B": 1}, "t").split() == []


def test_value_substitution() -> None:
    assert preprocess("let n = #{N};", {"N": "4u"}, "t") == "let n = 4u;"


def test_undefined_def_names_shader_and_line() -> None:
    with pytest.raises(ShaderError, match=r"shader 'binary' line 2: shader def 'N' is not defined"):
        preprocess("ok\nlet n = #{N};", {}, "binary")


def test_unbalanced_directives() -> None:
    with pytest.raises(ShaderError, match="not closed"):
        preprocess("#ifdef A\nx", {}, "t")
    with pytest.raises(ShaderError, match="without a matching"):
        preprocess("#endif", {}, "t")


def test_imports_are_included_once_and_enables_hoisted() -> None:
    lib = _lib(
        "#define_import_path onyxia::a\nfn a() {}",
        "#define_import_path onyxia::b\n#import onyxia::a\nfn b() {}",
    )
    out = preprocess("enable f16;\n#import onyxia::a\n#import onyxia::b::{b}\nfn main() {}", {}, "t", lib)
    assert out.count("fn a()") == 1
    assert out.index("fn a()") < out.index("fn b()") < out.index("fn main()")
    assert out.startswith("enable f16;")


def test_unknown_and_cyclic_imports() -> None:
    with pytest.raises(ShaderError, match="unknown import 'onyxia::nope'"):
        preprocess("#import onyxia::nope", {}, "t", _lib())
    lib = _lib("#define_import_path x::a\n#import x::b", "#define_import_path x::b\n#import x::a")
    with pytest.raises(ShaderError, match="cyclic import"):
        preprocess("#import x::a", {}, "t", lib)


_ITEMS_MODULE = """#define_import_path onyxia::m
// fn commented_out() {}
#ifdef WITH_EXTRA
fn extra() {}
#endif
struct Pair { first: u32, second: u32 }
const LIMIT: u32 = 4u;
alias Row = array<f32, 4>;
@group(0) @binding(0) var<storage, read> table: array<u32>;
var<workgroup> scratch: array<f32, 64>;
fn ravel(p: Pair) -> u32 {
    const local_const = 1u;
    var local_var = p.first;
    return local_var + local_const;
}"""


def test_import_item_list_names_declared_items() -> None:
    src = "#import onyxia::m::{ravel, Pair, LIMIT, Row, table, scratch}\nfn main() {}"
    out = preprocess(src, {}, "t", _lib(_ITEMS_MODULE))
    assert out.index("fn ravel(") < out.index("fn main()")
    # a second import of the same module checks its own list against the one copy
    out = preprocess("#import onyxia::m\n#import onyxia::m::{extra}", {"WITH_EXTRA": 1}, "t", _lib(_ITEMS_MODULE))
    assert out.count("fn ravel(") == 1


@pytest.mark.parametrize(
    ("src", "line", "missing"),
    [
        ("x\n#import onyxia::m::{ravel, unravel}", 2, "'unravel'"),
        ("#import onyxia::m::{local_var, local_const}", 1, "'local_var', 'local_const'"),
        ("#import onyxia::m::{commented_out}", 1, "'commented_out'"),
        ("#import onyxia::m::{extra}", 1, "'extra'"),  # declared only under an #ifdef not taken
        ("#import onyxia::m\n\n#import onyxia::m::{nope}", 3, "'nope'"),
    ],
)
def test_import_item_missing_from_module_names_shader_line_and_item(src: str, line: int, missing: str) -> None:
    with pytest.raises(
        ShaderError, match=rf"shader 'gather' line {line}: .* lists {missing}, which module 'onyxia::m' "
    ):
        preprocess(src, {}, "gather", _lib(_ITEMS_MODULE))


def test_import_item_missing_in_a_module_names_that_module() -> None:
    lib = _lib(_ITEMS_MODULE, "#define_import_path onyxia::n\n#import onyxia::m::{unravel}\nfn n() {}")
    with pytest.raises(ShaderError, match=r"shader 'mod1.wgsl' line 2: .*lists 'unravel'.*declares: LIMIT, Pair"):
        preprocess("#import onyxia::n::{n}", {}, "t", lib)


@pytest.mark.parametrize("arg", ["onyxia::m::{}", "onyxia::m::{ravel,}", "onyxia::m::{ravel unravel}"])
def test_malformed_import_item_list(arg: str) -> None:
    with pytest.raises(ShaderError, match=r"shader 't' line 1: malformed item list"):
        preprocess(f"#import {arg}", {}, "t", _lib(_ITEMS_MODULE))


def test_module_without_path() -> None:
    with pytest.raises(ShaderError, match="no '#define_import_path'"):
        _lib("fn a() {}")


def test_for_repeats_its_body_per_item() -> None:
    src = "#for s in 0 1  2\nlet w#{s} = #{BIND_W#{s}}u;\n#endfor\nend"
    out = preprocess(src, {"BIND_W0": 3, "BIND_W1": 4, "BIND_W2": 5}, "t").split("\n")
    assert [line for line in out if line] == ["let w0 = 3u;", "let w1 = 4u;", "let w2 = 5u;", "end"]


def test_for_items_come_from_defs_and_may_be_empty() -> None:
    src = "#for s in 0 #{OTHER}\ncase #{s}u\n#endfor"
    assert preprocess(src, {"OTHER": "1 2"}, "t").split() == ["case", "0u", "case", "1u", "case", "2u"]
    assert preprocess(src, {"OTHER": ""}, "t").split() == ["case", "0u"]
    assert preprocess("#for s in #{OTHER}\nx#{s}\n#endfor\n#for s in\ny\n#endfor", {"OTHER": ""}, "t").split() == []


def test_for_body_directives_apply_per_copy() -> None:
    src = "#for s in 1 2\n#ifdef A\na#{s}\n#endif\n#if MODE == #{s}\nmode#{s}\n#else\nnot#{s}\n#endif\n#endfor"
    assert preprocess(src, {"A": True, "MODE": 2}, "t").split() == ["a1", "not1", "a2", "mode2"]
    assert preprocess(src, {"MODE": 1}, "t").split() == ["mode1", "not2"]


def test_for_inside_dropped_block_needs_no_defs() -> None:
    src = "#ifdef A\n#for s in #{MISSING}\nx#{s}\n#endfor\n#endif\nend"
    assert preprocess(src, {}, "t").split() == ["end"]


def test_nested_for_loops() -> None:
    src = "#for i in 0 1\n#for j in #{i} 9\np#{i}#{j}\n#endfor\n#endfor"
    assert preprocess(src, {}, "t").split() == ["p00", "p09", "p11", "p19"]


@pytest.mark.parametrize(
    ("src", "defs", "message"),
    [
        ("x\n#for s in 1\ny", {}, r"shader 't' line 2: '#for' not closed by '#endfor'"),
        ("#for s in 1\n#endfor\n#endfor", {}, r"shader 't' line 3: '#endfor' without a matching '#for'"),
        ("#for s\n#endfor", {}, r"shader 't' line 1: '#for s' must read '#for NAME in ITEMS'"),
        ("#for 1 in 2\n#endfor", {}, r"line 1: '#for 1 in 2' must read"),
        ("#for N in 1\n#endfor", {"N": 4}, r"line 1: '#for N' shadows the shader def 'N'"),
        ("#for s in 1\n#for s in 2\n#endfor\n#endfor", {}, r"line 2: '#for s' shadows the loop variable 's'"),
        ("#for s in #{X}\n#endfor", {}, r"line 1: shader def 'X' is not defined"),
        ("#ifdef A\n#for s in 1\n#endif\n#endfor", {}, r"line 3: '#endif' of an '#if' opened outside its loop"),
        ("#for s in 1\n#ifdef A\n#endfor\n#endif", {}, r"line 3: '#endfor' inside an '#if' opened in its loop"),
    ],
)
def test_for_errors_name_shader_and_line(src: str, defs: dict[str, object], message: str) -> None:
    with pytest.raises(ShaderError, match=message):
        preprocess(src, defs, "t")
