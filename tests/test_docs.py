"""The docs stay true: docs/cli.md is what the CLI says about itself, every command's --help
agrees with it, and every document the README points to exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from typer.testing import CliRunner

from iotwin.cli import app

ROOT = Path(__file__).resolve().parents[1]


def gen_cli():
    spec = importlib.util.spec_from_file_location("gen_cli", ROOT / "docs" / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def words(text: str) -> str:
    """Text without rich's boxes and line breaks, for comparing wording."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_cli_reference_is_up_to_date() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == gen_cli().render(), (
        "docs/cli.md is out of date: run python docs/gen_cli.py"
    )


def test_every_command_help_agrees_with_the_reference() -> None:
    module = gen_cli()
    root = module.root_command()
    ctx = root.context_class(root, info_name="iotwin")
    doc = (ROOT / "docs" / "cli.md").read_text()
    commands = list(module.walk(root, ctx, []))
    assert len(commands) > 10
    for path, cmd, sub_ctx in commands:
        result = CliRunner().invoke(app, [*path, "--help"], terminal_width=250)
        assert result.exit_code == 0, (path, result.output)
        shown = words(result.output)
        assert f"## `{' '.join(['iotwin', *path])}`" in doc
        summary = words((cmd.help or "").split("\n\n")[0])
        assert summary and summary in shown and summary in words(doc), path
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                for name in p.opts:
                    if name.startswith("--"):
                        assert name in shown, (path, name)
                names, _ = p.get_help_record(sub_ctx)
                assert f"`{names}`" in doc, (path, names)
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(sub_ctx):
                assert name in shown, (path, name)


def test_readme_opens_with_what_and_why_then_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```\n(.*?)```", readme, re.S)
    assert [line.split("#")[0].strip() for line in blocks[0].splitlines()] == [
        "make demo",
        "make test",
    ]
    first_paragraph = readme.split("\n\n")[1]
    assert first_paragraph.startswith("iotwin learns")
    assert readme.index(first_paragraph) < readme.index("make demo")
    steps = re.findall(r"^(\d)\. \*\*(.+?)\*\*", readme, re.M)
    assert [n for n, _ in steps] == ["1", "2", "3", "4", "5"]
    for link in re.findall(r"`(docs/[\w./-]+|examples/[\w./-]+)`", readme):
        assert (ROOT / link).exists(), link
