"""The `rlprobe` command: a thin click shell over the library.

Errors users can act on are rlprobe.errors types raised deep in the library; they are turned
into one line on stderr and an exit code here, once, for every command. Command modules are
imported when the group is built but import duckdb only inside their functions, so
`rlprobe --help` stays fast.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from rlprobe import __version__
from rlprobe.errors import RlprobeError, RlprobeWarning


def _warnings_as_lines() -> Any:
    """Library warnings (a broken run left out of a root, ...) as one line each on stderr, each
    once per command, however many stores the command opened."""
    shown: set[str] = set()

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        text = str(message)
        if text not in shown:
            shown.add(text)
            click.echo(f"rlprobe: warning: {text}", err=True)

    return show


class RlprobeGroup(click.Group):
    """Maps RlprobeError to one line and its exit code, and usage errors to one line, exit 2."""

    def main(self, args: Any = None, prog_name: str | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("always", RlprobeWarning)
            warnings.showwarning = _warnings_as_lines()
            return self._main(args, prog_name, **kwargs)

    def _main(self, args: Any, prog_name: str | None, **kwargs: Any) -> Any:
        try:
            return super().main(args=args, prog_name=prog_name or "rlprobe", standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("rlprobe: aborted", err=True)
            sys.exit(130)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "rlprobe"
            click.echo(f"{command}: {exc.format_message()} (see {command} --help)", err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(f"rlprobe: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except RlprobeError as exc:
            click.echo(f"rlprobe: {exc}", err=True)
            sys.exit(exc.exit_code)
        except BrokenPipeError:
            sys.exit(0)  # `rlprobe query ... | head` is normal use


@click.group(cls=RlprobeGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="rlprobe")
def cli() -> None:
    """rlprobe: a flight recorder and doctor for RL fine-tuning runs.

    A recording is a run directory (manifest.json, steps, samples, events) written by
    rlprobe.Recorder. Every command takes a run directory or a runs root (a folder with runs
    at any depth) and reads it through versioned SQL views: steps, samples, events, runs,
    manifest.

    Example:

    \b
        rlprobe ls runs/
        rlprobe query runs/my-run "SELECT step, reward_mean, kl_mean FROM steps ORDER BY step"
    """


def main() -> None:
    """Console-script entry point."""
    cli.main()


from rlprobe.cli import query as _query  # noqa: E402  (registers commands on cli)

__all__ = ["cli", "main"]
from rlprobe.cli import doctor as _doctor  # noqa: E402
from rlprobe.cli import synth as _synth  # noqa: E402
from rlprobe.cli import imports as _imports  # noqa: E402
from rlprobe.cli import watch as _watch  # noqa: E402
from rlprobe.cli import forensics as _forensics  # noqa: E402
from rlprobe.cli import report as _report  # noqa: E402
from rlprobe.cli import records as _records  # noqa: E402
from rlprobe.cli import rollouts as _rollouts  # noqa: E402
from rlprobe.cli import ui as _ui  # noqa: E402
from rlprobe.cli import export as _export  # noqa: E402
