"""Compare two runs: what changed in the config, where each metric first diverged, which
prompts are rewarded differently.

    from rlprobe.diff import diff_runs
    d = diff_runs("runs/baseline", "runs/higher-lr")
    d.config_delta, d.first_divergence, d.prompt_gaps[:5]

Works on runs of different lengths and metric sets, live, crashed or imported.
"""

from rlprobe.diff.compare import BadDiffArgument, config_delta, diff_runs, flatten_config
from rlprobe.diff.models import ConfigChange, Divergence, PromptGap, RunDiff, RunSide

__all__ = ["BadDiffArgument", "ConfigChange", "Divergence", "PromptGap", "RunDiff", "RunSide", "config_delta",
           "diff_runs", "flatten_config"]
