"""Helpers for the provider tests: fake HTTP transports and the tiny ONNX cross-encoder."""
