"""Adapters that record a framework's training run: `rlprobe.integrations.trl` for TRL trainers.

Nothing here is imported by `import rlprobe`; each adapter imports its framework lazily.
"""
