"""``veriloop replay``: restore an episode's final workspace and judge it again."""

from __future__ import annotations

from pathlib import Path

import typer


def replay(
    trajectory_id: str = typer.Argument(..., help="the episode's trajectory id (samples.parquet's trajectory_id)"),
    run: Path = typer.Option(Path("."), "--run", help="the eval or training run directory that kept the scene"),
    tasks: list[Path] = typer.Option([], "--tasks", help="task files to find its task in (default: the run's own)"),
    shell: bool = typer.Option(False, "--shell", help="then open a shell in a sandbox holding the workspace"),
    plugins: list[str] = typer.Option([], "--plugin", help="module or .py file that registers verifier kinds"),
) -> int:
    """Rerun the verifier on the kept final workspace and print its score as JSON.

    Exits 0 when the verdict is the one recorded, 1 when it differs, 2 on bad arguments.
    """
    from rich.console import Console

    from veriloop.core import load_plugins
    from veriloop.evaluation import find_scene, replay_scene

    load_plugins(plugins)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    scene = find_scene(run, trajectory_id, [str(t) for t in tasks])
    score = replay_scene(scene)
    typer.echo(score.model_dump_json())
    same = score.reward == scene.reward and score.passed == scene.passed
    recorded = f"recorded reward {scene.reward}, passed {scene.passed}"
    err.print(f"{'same verdict' if same else 'verdict changed'}: {score.reward} now, {recorded}", markup=False)
    if scene.environment and score.environment and score.environment != scene.environment:
        err.print(
            f"note: environment {scene.task.environment} is {score.environment[:12]} now, "
            f"{scene.environment[:12]} when recorded",
            markup=False,
        )
    if shell:
        from veriloop.sandbox import open_shell

        err.print("a shell in the scene's workspace (a copy); exit to leave", markup=False)
        open_shell(scene.snapshot.files(), scene.task.environment)
    return 0 if same else 1
