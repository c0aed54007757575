"""ONNX backend node-case conformance: `harness` runs the cases, `expected` lists known failures, `report` prints."""
