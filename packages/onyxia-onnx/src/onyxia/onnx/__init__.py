"""onyxia.onnx"""
