"""models: the local embedding model that search by meaning runs in process."""

from __future__ import annotations

from pathlib import Path

import click

from memkeeper.cli import App, json_option, pass_app, print_json


@click.group("models")
def models() -> None:
    """The local embedding model (search by meaning with no key and no server)."""


@models.command("pull")
@click.argument("name", required=False)
@click.option(
    "--from",
    "source",
    type=click.Path(path_type=Path),
    help="Copy the model from this directory or zip (tokenizer.json and .safetensors "
    "weights) instead of downloading it: for a machine without network.",
)
@json_option
@pass_app
def pull(app: App, name: str | None, source: Path | None, as_json: bool) -> None:
    """Put the local embedding model NAME (default: [search] local_model) into the model
    cache, from the Hugging Face hub or from --from PATH. The next index run embeds every
    entry with it."""
    from memkeeper.llm.model_pull import PullFailed
    from memkeeper.llm.model_pull import pull as pull_model

    wanted = name or app.config.search.local_model
    try:
        folder = pull_model(wanted, source=source)
    except PullFailed as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        print_json({"model": wanted, "folder": str(folder)})
    else:
        click.echo(f"{wanted}: {folder}")


@models.command("show")
@json_option
@pass_app
def show(app: App, as_json: bool) -> None:
    """Which embedder search uses, its model, and why search is keyword-only if it is."""
    from memkeeper.store import vector_source

    found = vector_source.source(app.config)
    data = {
        "embedder": found.kind,
        "model": found.model,
        "dimensions": found.dims,
        "folder": found.folder,
        "keyword_only": found.missing,
    }
    if as_json:
        print_json(data)
        return
    click.echo(f"embedder {found.kind}, model {found.model}, {found.dims} dimensions")
    if found.folder:
        click.echo(f"from {found.folder}")
    if found.missing:
        click.echo(f"search is keyword-only: {found.missing}")


def register(cli: click.Group) -> None:
    cli.add_command(models)
