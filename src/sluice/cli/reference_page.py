"""docs/cli.md, generated from the click commands themselves (`sluice cli-reference`): every
command of `sluice` and `kubectl sluice`, its usage, what it does and each option."""

from __future__ import annotations

import inspect

import click


def _commands(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    if getattr(command, "hidden", False):
        return []
    if isinstance(command, click.Group):
        found: list[tuple[list[str], click.Command]] = [] if len(path) == 1 else [(path, command)]
        for name in sorted(command.commands):
            found += _commands(command.commands[name], [*path, name])
        return found
    return [(path, command)]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _option_row(param: click.Option) -> str:
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    kind = "flag" if param.is_flag else param.type.name.upper()
    value = param.default if isinstance(param.default, str | int | float | bool) else None
    if param.is_flag:
        default = f"`{'on' if value else 'off'}`" if param.secondary_opts else ""
    else:
        default = "" if value is None else f"`{value}`"
    return f"| {names} | {kind} | {default} | {_cell(param.help or '')} |"


def cli_markdown(roots: list[tuple[str, click.Group]]) -> str:
    """The page: one section a command, in the order a user meets them."""
    lines = ["# Command-line reference", "",
             "Generated from the commands themselves (`sluice cli-reference > docs/cli.md`; a test keeps it equal).",
             "Every duration takes the same form (`500ms`, `45s`, `2m`, `1h`); every command that prints a table",
             "takes `--json` for scripts. Exit codes: 0 done; 1 bad input or a failed run (one sentence says which);",
             "2 a command line that cannot be parsed; 3 SLAs missed (`sluice size`).", ""]
    for prog, root in roots:
        for path, command in _commands(root, [prog]):
            ctx = click.Context(command, info_name=" ".join(path))
            lines += [f"## `{' '.join(path)}`", "", "```", command.get_usage(ctx).replace("Usage: ", ""), "```", ""]
            if command.help:
                lines += [inspect.cleandoc(command.help), ""]
            options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
            if options:
                lines += ["| option | takes | default | what it does |", "|---|---|---|---|"]
                lines += [_option_row(p) for p in options]
                lines.append("")
    return "\n".join(lines).rstrip() + "\n"
