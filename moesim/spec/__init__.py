"""Pydantic data: model shapes, device profiles, weight formats, run configurations."""
