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


def test_module_without_path() -> None:
    with pytest.raises(ShaderError, match="no '#define_import_path'"):
        _lib("fn a() {}")
