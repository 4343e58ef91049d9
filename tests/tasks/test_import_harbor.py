"""``veriloop tasks import harbor``: Harbor task folders become workspace tasks on content-hashed
environments, judged by their own test.sh; what cannot be reproduced is refused, every folder at once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from veriloop.core import RowErrors
from veriloop.tasks import import_tasks

EXAMPLES = Path(__file__).parents[2] / "examples" / "harbor"


def _task_folder(root: Path, name: str, dockerfile: str, toml: str = "", files: dict[str, str] | None = None) -> Path:
    folder = root / name
    contents = {
        "task.toml": toml or 'version = "1.0"\n[verifier]\ntimeout_sec = 30.0\n',
        "instruction.md": "Write 42 to /app/answer.txt.\n",
        "environment/Dockerfile": dockerfile,
        "tests/test.sh": "grep -qx 42 /app/answer.txt\n",
        "solution/solve.sh": "echo 42 > /app/answer.txt\n",
        **(files or {}),
    }
    for path, text in contents.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


PLAIN = "FROM python:3.12-slim\nWORKDIR /app\n"


def test_refused_folders_are_all_reported_with_their_lines_and_nothing_is_written(tmp_path, run_cli):
    _task_folder(tmp_path, "good", PLAIN)
    _task_folder(tmp_path, "apt", "FROM python:3.12\nWORKDIR /app\nRUN apt-get install -y jq\n")
    _task_folder(tmp_path, "ubuntu", "# from a plain OS\nFROM ubuntu:24.04\nRUN pip install numpy\nWORKDIR /app\n")
    out = tmp_path / "tasks.jsonl"
    done = run_cli("tasks", "import", "harbor", str(tmp_path), "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert f"{tmp_path}/apt/environment/Dockerfile: line 3: RUN: `apt-get install -y jq`: only pip install" in lines[0]
    assert f"{tmp_path}/ubuntu/environment/Dockerfile: line 2: FROM: base image 'ubuntu:24.04'" in lines[1]
    assert lines[-1] == "2 of 3 Harbor task folders refused; nothing written"
    assert not out.exists()


def test_every_problem_of_a_folder_is_named(tmp_path):
    _task_folder(
        tmp_path,
        "many",
        PLAIN,
        toml='[verifier]\ntimeout_sec = -1\nenv = { KEY = "${OPENAI_API_KEY}" }\n[environment]\nmemory = "lots"\n',
    )
    (tmp_path / "many" / "tests" / "test.sh").unlink()
    (tmp_path / "many" / "instruction.md").unlink()
    _task_folder(tmp_path, "prebuilt", PLAIN, toml='[environment]\ndocker_image = "ghcr.io/x/y:1"\n')
    _task_folder(tmp_path, "broken-toml", PLAIN, toml="[verifier\n")
    with pytest.raises(RowErrors) as caught:
        import_tasks("harbor", path=tmp_path)
    text = "\n".join(caught.value.errors)
    assert f"{tmp_path}/many/instruction.md: missing" in text
    assert f"{tmp_path}/many/tests: has no test.sh" in text
    assert "[verifier] timeout_sec must be a positive number of seconds, not -1" in text
    assert "[verifier] env KEY takes a value from the host's environment" in text
    assert "[environment] memory 'lots' is not a size" in text
    assert "docker_image 'ghcr.io/x/y:1' is a prebuilt image" in text
    assert f"{tmp_path}/broken-toml/task.toml: not TOML" in text and "(at line 1" in text
    assert caught.value.errors[-1] == "3 of 3 Harbor task folders refused; nothing written"


def test_tasks_harbor_would_judge_in_another_shape_are_refused(tmp_path):
    _task_folder(tmp_path, "separate", PLAIN, toml='[verifier]\nenvironment_mode = "separate"\n')
    _task_folder(tmp_path, "own-image", PLAIN, toml='[verifier.environment]\ndocker_image = "python:3.12"\n')
    _task_folder(tmp_path, "collect", PLAIN, toml='[[verifier.collect]]\nservice = "db"\ncommand = "dump"\n')
    _task_folder(tmp_path, "steps", PLAIN, toml='[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n')
    _task_folder(tmp_path, "shared", PLAIN, toml='[verifier]\nenvironment_mode = "shared"\n')
    with pytest.raises(RowErrors) as caught:
        import_tasks("harbor", path=tmp_path)
    text = "\n".join(caught.value.errors)
    assert f"{tmp_path}/separate/task.toml: [verifier] runs the tests in a container of their own" in text
    assert f"{tmp_path}/own-image/task.toml: [verifier] runs the tests in a container of their own" in text
    assert f"{tmp_path}/collect/task.toml: [[verifier.collect]] reads compose services" in text
    assert f"{tmp_path}/steps/task.toml: [[steps]] makes a task of several steps" in text
    assert "shared" not in {Path(line.split(":")[0]).parent.name for line in caught.value.errors[:-1]}
    assert caught.value.errors[-1] == "4 of 5 Harbor task folders refused; nothing written"


def test_a_folder_without_tasks_and_a_workdir_the_sandbox_owns_are_user_errors(tmp_path, run_cli):
    done = run_cli("tasks", "import", "harbor", str(tmp_path), "--out", str(tmp_path / "t.jsonl"))
    assert done.returncode == 2 and "holds no Harbor task folder" in done.stderr
    _task_folder(
        tmp_path, "usr", "FROM python:3.12\nWORKDIR /usr/src/app\nCOPY a.py .\n", files={"environment/a.py": "1"}
    )
    with pytest.raises(RowErrors, match="WORKDIR /usr/src/app cannot be the workspace: .*/usr is the sandbox's own"):
        import_tasks("harbor", path=tmp_path)


def test_a_folder_maps_to_an_environment_named_by_what_it_holds(tmp_path):
    from veriloop.tasks.importers._harbor import HarborOptions, read_task_folder

    dockerfile = "FROM python:3.12\nRUN pip install numpy\nENV MODE=fast\nWORKDIR /srv/app\n"
    folder = _task_folder(
        tmp_path, "one", dockerfile, toml='[agent]\ntimeout_sec = 90\n[environment]\nmemory = "512M"\n'
    )
    packages = HarborOptions(path=tmp_path, packages="pytest, requests").packages
    task, problems = read_task_folder(folder, packages)
    assert problems == [] and task.environment.packages == ("numpy", "pytest", "requests")
    assert task.environment.links["/srv/app"] == "/workspace" and task.environment.links["/logs"] == "/tmp/harbor-logs"
    assert task.environment.variables == {"MODE": "fast"}
    assert (task.settings.agent_timeout_s, task.settings.memory_mb, task.settings.verifier_timeout_s) == (
        90.0,
        512,
        600.0,
    )
    same, _ = read_task_folder(_task_folder(tmp_path, "two", dockerfile), packages)
    other, _ = read_task_folder(_task_folder(tmp_path, "three", dockerfile.replace("fast", "slow")), packages)
    assert same.environment.name == task.environment.name != other.environment.name
    assert task.environment.name.startswith("harbor-")


@pytest.mark.e2e
def test_the_examples_import_validate_and_judge_wrong_answers(env_store, tmp_path, run_cli):
    out = tmp_path / "harbor.jsonl"
    done = run_cli("tasks", "import", "harbor", str(EXAMPLES), "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr
    tasks = {task["id"]: task for task in map(json.loads, out.read_text().splitlines())}
    assert sorted(tasks) == ["fix-median", "greeting", "word-report"]
    median, report = tasks["fix-median"], tasks["word-report"]
    assert median["workspace"] == {"stats.py": (EXAMPLES / "fix-median/environment/stats.py").read_text()}
    assert report["workspace"] == {"data/text.txt": (EXAMPLES / "word-report/environment/data/text.txt").read_text()}
    assert median["verifier"]["command"] == ["bash", "/tests/test.sh"]
    assert sorted(median["verifier"]["files"]) == [".harbor/tests/check_median.py", ".harbor/tests/test.sh"]
    assert (median["verifier"]["timeout_s"], report["verifier"]["memory_mb"]) == (60.0, 1024)
    assert report["verifier"]["variables"] == {"REPORT": "/app/report.json"}
    assert median["gold"] == {"workspace": {"stats.py": median["gold"]["workspace"]["stats.py"]}}
    assert "(ordered[middle - 1] + ordered[middle]) / 2" in median["gold"]["workspace"]["stats.py"]
    assert median["metadata"]["agent_timeout_s"] == 300.0 and median["metadata"]["metadata"]["category"] == "debugging"
    built = json.loads((env_store / f"{report['environment']}.json").read_text())
    assert built["links"]["/app"] == "/workspace" and built["variables"]["REPORT_FORMAT"] == "json"
    assert tasks["greeting"]["environment"] != median["environment"] and "pytest" in json.dumps(
        json.loads((env_store / f"{tasks['greeting']['environment']}.json").read_text())["packages"]
    )

    assert run_cli("tasks", "validate", str(out)).returncode == 0
    manifests = {p.name: p.read_text() for p in env_store.glob("harbor-*.json")}
    again = run_cli("tasks", "import", "harbor", str(EXAMPLES), "--out", str(tmp_path / "again.jsonl"), timeout=600)
    assert again.returncode == 0 and (tmp_path / "again.jsonl").read_text() == out.read_text()
    assert {p.name: p.read_text() for p in env_store.glob("harbor-*.json")} == manifests  # nothing built again
    answers = {
        "greeting-right": ("greeting", {"greeting.txt": "Hello, world!\n"}),
        "greeting-wrong": ("greeting", {"greeting.txt": "Hello, moon!\n"}),
        "median-unchanged": ("fix-median", median["workspace"]),
        "report-partial": ("word-report", {**report["workspace"], "report.json": '{"lines": 3, "words": 1}'}),
        "report-forged": ("word-report", {**report["workspace"], ".harbor/tests/score_report.py": "print(1)"}),
    }
    responses = tmp_path / "responses.jsonl"
    rows = [{"id": i, "task_id": t, "response": "done", "workspace": w} for i, (t, w) in answers.items()]
    responses.write_text("".join(json.dumps(row) + "\n" for row in rows))
    scores_path = tmp_path / "scores.jsonl"
    verified = run_cli("verify", "--tasks", str(out), "--responses", str(responses), "--out", str(scores_path))
    assert verified.returncode == 0, verified.stderr
    scores = {s["id"]: s for s in map(json.loads, scores_path.read_text().splitlines())}
    got = {i: (s["status"], round(s["reward"], 3), s["passed"]) for i, s in scores.items()}
    assert got == {
        "greeting-right": ("scored", 1.0, True),
        "greeting-wrong": ("scored", 0.0, False),
        "median-unchanged": ("scored", 0.0, False),
        "report-partial": ("scored", 0.333, False),
        "report-forged": ("scored", 0.0, False),
    }, scores
    assert "from reward.txt" in scores["greeting-wrong"]["detail"]
    assert "from the exit code (exit code 1)" in scores["median-unchanged"]["detail"]
    assert "from reward.json" in scores["report-partial"]["detail"]


@pytest.mark.e2e
def test_a_failing_or_destructive_reference_solution_is_refused(env_store, tmp_path):
    _task_folder(tmp_path, "fails", PLAIN, files={"solution/solve.sh": "echo broken >&2\nexit 4\n"})
    _task_folder(
        tmp_path,
        "deletes",
        PLAIN + "COPY old.txt /app/old.txt\n",
        files={"environment/old.txt": "old", "solution/solve.sh": "rm /app/old.txt\necho 42 > /app/answer.txt\n"},
    )
    with pytest.raises(RowErrors) as caught:
        import_tasks("harbor", path=tmp_path)
    errors = caught.value.errors
    assert (
        f"{tmp_path}/deletes/solution/solve.sh: removes old.txt; a gold workspace can only add or change files"
        in errors
    )
    assert f"{tmp_path}/fails/solution/solve.sh: the reference solution failed (exit code 4): broken" in errors
    assert errors[-1] == "2 of 2 reference solutions failed; nothing written"


@pytest.mark.e2e
def test_an_agent_works_in_the_container_s_paths_during_an_episode(env_store, tmp_path):
    from veriloop.evaluation import read_samples, run_eval
    from veriloop.evaluation._run import eval_episode_config

    folder = tmp_path / "tasks"
    shutil.copytree(EXAMPLES / "greeting", folder / "greeting")
    tasks = tmp_path / "greeting.jsonl"
    from veriloop.core import write_records

    write_records(tasks, import_tasks("harbor", path=folder))
    prompt = (EXAMPLES / "greeting" / "instruction.md").read_text()
    turns = ["<run_shell>cd /app && echo 'Hello, world!' > greeting.txt && ls /app</run_shell>", "done"]
    policy = tmp_path / "policy.jsonl"
    policy.write_text(json.dumps({"prompt": prompt, "turns": turns}) + "\n")
    episode = eval_episode_config(1.0, 64, ("python", "shell", "submit"), 4)
    summary = run_eval(f"replay:{policy}", tasks, out=tmp_path / "run", episode=episode, record=False)
    assert summary["pass@1"] == 1.0, read_samples(tmp_path / "run" / "samples.parquet")[0].detail
    [sample] = read_samples(tmp_path / "run" / "samples.parquet")
    assert "greeting.txt" in sample.episode[1]["text"]  # the shell's answer: the file is in /app
