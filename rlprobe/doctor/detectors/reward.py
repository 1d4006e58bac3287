"""Signatures of reward: see docs/signatures/."""

from __future__ import annotations
