"""Signatures of generation: see docs/signatures/."""

from __future__ import annotations
