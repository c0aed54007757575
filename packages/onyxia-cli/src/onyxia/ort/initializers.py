"""Initializers a session's options supply: `SessionOptions.add_initializer` / `add_external_initializers`
(an initializer replaced by a given array) and `add_external_initializers_from_files_in_memory` (an
external-data file given as bytes instead of read from disk).

Both edit a copy of the model's protobuf before it is parsed, so the compiled plan holds the given
data as its weights, exactly as onnxruntime's session uses them; a name the model has no initializer
of is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from onyxia.ort.errors import InvalidArgument, ort_error

__all__ = ["with_initializers"]


def with_initializers(
    model: onnx.ModelProto, arrays: Mapping[str, np.ndarray], files: Mapping[str, bytes]
) -> onnx.ModelProto:
    """`model`, or a copy of it with `arrays` (initializer name -> value) and the external `files`
    (location -> bytes) put in place."""
    if not arrays and not files:
        return model
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    found = set()
    for tensor in edited.graph.initializer:
        if tensor.name in arrays:
            tensor.CopyFrom(numpy_helper.from_array(np.asarray(arrays[tensor.name]), tensor.name))
            found.add(tensor.name)
        elif tensor.data_location == TensorProto.EXTERNAL:
            keys = {entry.key: entry.value for entry in tensor.external_data}
            if keys.get("location") in files:
                _read_from_memory(tensor, keys, files[keys["location"]])
    missing = sorted(set(arrays) - found)
    if missing:
        raise ort_error(InvalidArgument, f"Initializer '{missing[0]}' given in SessionOptions is not in the model")
    return edited


def _read_from_memory(tensor: TensorProto, keys: dict[str, str], data: bytes) -> None:
    offset = int(keys.get("offset", 0))
    length = int(keys["length"]) if "length" in keys else len(data) - offset
    raw = data[offset : offset + length]
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT
    tensor.raw_data = raw
