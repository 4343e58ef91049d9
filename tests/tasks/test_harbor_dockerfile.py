"""Reading a Harbor task's Dockerfile: what becomes an environment and a workspace, and what is
refused (every refused line, with its number)."""

from __future__ import annotations

from pathlib import Path

import pytest

from veriloop.tasks.importers._dockerfile import instructions, read_image


def _context(tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    for name, text in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    path = tmp_path / "Dockerfile"
    path.write_text(dockerfile)
    return path


def test_continuations_and_comments_keep_each_instruction_s_first_line():
    text = "# a comment\nFROM python:3.12\n\nRUN pip install \\\n    # the numbers\n    numpy \\\n    pandas\nWORKDIR /app\n"
    steps = instructions(text)
    assert [(s.line, s.keyword) for s in steps] == [(2, "FROM"), (4, "RUN"), (8, "WORKDIR")]
    assert steps[1].arguments.split() == ["pip", "install", "numpy", "pandas"]


def test_a_pip_only_dockerfile_becomes_packages_variables_and_a_workspace(tmp_path):
    dockerfile = _context(
        tmp_path,
        "FROM python:3.12-slim-bookworm AS base\n"
        "LABEL maintainer=someone\n"
        "RUN pip install --no-cache-dir numpy==2.1.0 'pandas>=2' && python -m pip install -q -r requirements.txt\n"
        'ENV PYTHONUNBUFFERED=1 GREETING="hello world"\n'
        "ENV MODE fast mode\n"
        "WORKDIR /app\n"
        "COPY src/ ./src/\n"
        "COPY main.py .\n"
        'COPY ["notes.txt", "data/notes.txt"]\n'
        "ADD config.ini /app\n"
        "COPY *.cfg conf/\n"
        'CMD ["python", "main.py"]\n',
        {
            "requirements.txt": "requests==2.32.3  # pinned\n\n",
            "src/pkg/__init__.py": "",
            "src/pkg/core.py": "X = 1\n",
            "main.py": "print(1)\n",
            "notes.txt": "n\n",
            "config.ini": "[a]\n",
            "a.cfg": "1",
            "b.cfg": "2",
            "unused.txt": "not copied",
        },
    )
    image, problems = read_image(dockerfile)
    assert problems == []
    assert image.python == "3.12"
    assert image.packages == ["numpy==2.1.0", "pandas>=2", "requests==2.32.3"]
    assert image.variables == {"PYTHONUNBUFFERED": "1", "GREETING": "hello world", "MODE": "fast mode"}
    assert image.workdir == "/app"
    workspace, outside = image.workspace()
    assert outside == []
    assert sorted(workspace) == [
        "conf/a.cfg",
        "conf/b.cfg",
        "config.ini",
        "data/notes.txt",
        "main.py",
        "src/pkg/__init__.py",
        "src/pkg/core.py",
    ]
    assert workspace["src/pkg/core.py"] == b"X = 1\n"


def test_copying_the_whole_context_skips_the_build_s_own_files_and_ignored_ones(tmp_path):
    dockerfile = _context(
        tmp_path,
        "FROM python:3.11\nWORKDIR /srv/app\nCOPY . .\n",
        {"app.py": "1", "cache/x.pyc": "2", ".dockerignore": "cache\n*.log\n", "run.log": "3", "lib/util.py": "4"},
    )
    image, problems = read_image(dockerfile)
    assert problems == [] and sorted(image.workspace()[0]) == ["app.py", "lib/util.py"]


def test_every_line_that_cannot_be_an_environment_is_refused_with_its_number(tmp_path):
    dockerfile = _context(
        tmp_path,
        "FROM ubuntu:22.04\n"  # 1
        "RUN apt-get update && apt-get install -y jq\n"  # 2
        "RUN curl -fsSL https://example.com/install.sh | sh\n"  # 3
        "ARG VERSION=1\n"  # 4
        "RUN pip install numpy==$VERSION\n"  # 5
        "COPY --from=builder /out /app\n"  # 6
        "ADD https://example.com/data.csv /app/\n"  # 7
        "FROM python:3.12 AS second\n"  # 8
        "RUN pip install -e .\n"  # 9
        "VOLUME /data\n",  # 10
    )
    _, problems = read_image(dockerfile)
    where = [problem.split(": ", 3)[1] for problem in problems]
    assert where == [f"line {n}" for n in range(1, 11)], problems
    text = "\n".join(problems)
    assert "base image 'ubuntu:22.04' is not supported" in text
    assert "`apt-get update`: only pip install can be turned into an environment" in text
    assert "'|'" in text and "variables are not expanded" in text
    assert "COPY --from" in text and "fetched from the network" in text and "multi-stage" in text
    assert "pip option -e is not supported" in text and "VOLUME: not supported" in text
    assert all(problem.startswith(f"{dockerfile}: line ") for problem in problems)


def test_files_copied_outside_the_workdir_are_refused_with_their_copy_line(tmp_path):
    dockerfile = _context(
        tmp_path,
        "FROM python:3.12\nWORKDIR /app\nCOPY a.txt /app/a.txt\nCOPY b.txt /data/b.txt\n",
        {"a.txt": "a", "b.txt": "b"},
    )
    _, problems = read_image(dockerfile)
    assert problems == [
        f"{dockerfile}: line 4: COPY: /data/b.txt lies outside WORKDIR /app, the only folder a task's workspace holds"
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("COPY missing.txt /app/", "'missing.txt' is not in the environment folder"),
        ("COPY ../secret /app/", "lies outside the environment folder"),
        ("ENV PATH=/opt/venv/bin:$PATH", "variables in values are not expanded"),
        ("ENV HOME=/root", "the sandbox sets it"),
        ("ADD data.tar.gz /app/", "ADD unpacks data.tar.gz"),
        ("RUN pip install git+https://example.com/repo.git", "is a path or URL"),
        ("RUN pip install numpy; rm -rf /root/.cache", "not ';'"),
    ],
)
def test_one_bad_line_says_what_is_wrong(tmp_path, line, message):
    dockerfile = _context(tmp_path, f"FROM python:3.12\nWORKDIR /app\n{line}\n", {"data.tar.gz": "x"})
    _, problems = read_image(dockerfile)
    assert len(problems) == 1 and problems[0].startswith(f"{dockerfile}: line 3: ") and message in problems[0]
