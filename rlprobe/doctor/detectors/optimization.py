"""Signatures of optimization: see docs/signatures/."""

from __future__ import annotations
