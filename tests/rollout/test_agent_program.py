"""The agent program runner: a command or a function, run unchanged with the gateway's URL in
its environment and the prompt on standard input or as an argument; its standard output is the
answer, and a crash or a run past its time limit is a failure of its own (killed, children too)."""

import asyncio
import os
import sys
import textwrap
import time

import pytest
from pydantic import ValidationError

from veriloop.rollout._agent import AgentProgram, prompt_text, run_agent


def _run(program, prompt="What is 2+2?"):
    return asyncio.run(run_agent(program, prompt, "http://127.0.0.1:9/episodes/e1/v1", "key-1", "e1"))


ECHO = "import os, sys; print(os.environ['OPENAI_BASE_URL'], os.environ['OPENAI_API_KEY'], '|', {})"


def test_a_command_gets_the_url_key_and_prompt_and_prints_its_answer():
    run = _run(AgentProgram(command=(sys.executable, "-c", ECHO.format("sys.stdin.read()"))))
    assert not run.failed and run.failure() == ""
    assert run.answer == "http://127.0.0.1:9/episodes/e1/v1 key-1 | What is 2+2?"
    as_argument = AgentProgram(command=(sys.executable, "-c", ECHO.format("sys.argv[-1]")), prompt="argument")
    assert _run(as_argument).answer.endswith("| What is 2+2?")


def test_a_function_runs_in_its_own_process_and_only_its_return_value_is_the_answer(tmp_path):
    (tmp_path / "my_agent.py").write_text(
        textwrap.dedent(
            """
            import os

            def solve(prompt):
                print("thinking out loud")  # not part of the answer
                return {"answer": prompt.upper(), "url": os.environ["OPENAI_BASE_URL"]}

            async def solve_async(prompt):
                return "async " + prompt
            """
        )
    )
    run = _run(AgentProgram(callable="my_agent:solve", cwd=str(tmp_path)))
    assert run.answer == '{"answer": "WHAT IS 2+2?", "url": "http://127.0.0.1:9/episodes/e1/v1"}'
    assert "thinking out loud" in run.stderr
    assert _run(AgentProgram(callable="my_agent:solve_async", cwd=str(tmp_path))).answer == "async What is 2+2?"


def test_a_crash_is_a_failure_with_its_error(tmp_path):
    run = _run(AgentProgram(command=(sys.executable, "-c", "raise SystemExit('no tools today')")))
    assert run.failed and run.exit_code == 1
    assert "exited with code 1: no tools today" in run.failure()


def test_a_program_past_its_limit_is_killed_with_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)"
    )
    started = time.monotonic()
    run = _run(AgentProgram(command=(sys.executable, "-c", script), timeout_s=1.5))
    assert run.exit_code is None and "did not finish within its time limit" in run.failure()
    assert time.monotonic() - started < 30
    child = int(pid_file.read_text())
    for _ in range(50):  # reaped by init once killed
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the agent's child process outlived it")


def test_the_config_names_exactly_one_program():
    with pytest.raises(ValidationError, match="exactly one of command or callable"):
        AgentProgram()
    with pytest.raises(ValidationError, match="exactly one of command or callable"):
        AgentProgram(command=("agent",), callable="m:f")
    with pytest.raises(ValidationError, match="is not module:function"):
        AgentProgram(callable="agent")


def test_a_chat_prompt_gives_its_last_user_message():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Add 2 and 2."}]
    assert prompt_text(messages) == "Add 2 and 2."
    assert prompt_text("plain") == "plain"


def test_a_function_that_raises_or_overruns_is_a_failure_and_leaves_nothing(tmp_path):
    pid_file = tmp_path / "child.pid"
    (tmp_path / "bad_agent.py").write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys, time

            def broken(prompt):
                raise RuntimeError("the tool server is down")

            def slow(prompt):
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                open({str(pid_file)!r}, "w").write(str(child.pid))
                time.sleep(60)
            """
        )
    )
    run = _run(AgentProgram(callable="bad_agent:broken", cwd=str(tmp_path)))
    assert run.failed and "RuntimeError: the tool server is down" in run.failure()
    run = _run(AgentProgram(callable="bad_agent:slow", cwd=str(tmp_path), timeout_s=2))
    assert run.exit_code is None and "did not finish within its time limit" in run.failure()
    child = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the agent function's child process outlived it")


def test_each_forked_episode_gets_its_own_environment(tmp_path):
    (tmp_path / "env_agent.py").write_text("import os\n\ndef url(prompt):\n    return os.environ['OPENAI_BASE_URL']\n")
    program = AgentProgram(callable="env_agent:url", cwd=str(tmp_path))

    async def both():
        return await asyncio.gather(
            run_agent(program, "q", "http://127.0.0.1:9/episodes/a/v1", "k", "a"),
            run_agent(program, "q", "http://127.0.0.1:9/episodes/b/v1", "k", "b"),
        )

    first, second = asyncio.run(both())
    assert (first.answer, second.answer) == ("http://127.0.0.1:9/episodes/a/v1", "http://127.0.0.1:9/episodes/b/v1")
