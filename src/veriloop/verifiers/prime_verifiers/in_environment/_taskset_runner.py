"""Runs a verifiers taskset inside the sandbox, on an environment that holds ``verifiers`` and
the taskset's package; answers the host in lines that start with the host's key.

The host (``_taskset.py``) fills in ``SETTINGS`` before sending this source, a fresh ``key``
among them. This program's answers go out on stdout as it was when the program started, kept on
a descriptor of its own that no child inherits; descriptor 1 is then pointed at stderr, so what
the taskset's code prints (and code it runs: a reward that runs the model's program) cannot pass
for an answer, and a line without the key is never one. The answers: ``scoring`` just before the
taskset's reward code runs on the response, then ``answer`` (the result) or ``error`` (the
taskset's exception); a process that ends after ``scoring`` with neither was ended by what that
code ran. Two modes:

- ``export``: the taskset's tasks ``skip`` to ``skip + size`` (in ``load()`` order), each as its
  task type's name, its key, its data as JSON (the wire form verifiers writes on its traces) and
  the messages that open it (the system prompt, then the prompt);
- ``score``: the task rebuilt from its data, a trace made of the task's messages and the model's
  turns (``turns``; each one an assistant message the model produced, in order), and the task's
  own ``score`` run on it without a runtime, as verifiers' offline replay does: the reward is
  the weighted sum of the task's rewards. Rewards that need a runtime cannot run here and are
  listed apart (``unsupported`` when that is all of them); a task with judges is
  ``unsupported``: they need a model this sandbox cannot reach.

A package that exposes ``load_environment(**args)`` instead (the API of verifiers before 0.4,
which most published environments use) is run through it: the environment's ``eval_dataset``
(``split``: ``auto`` takes it when there is one, else ``dataset``) gives the rows (``prompt``
messages, or ``question`` after the environment's ``system_prompt``; ``answer``, ``info`` and
``task`` kept), and its ``rubric.score_rollout(prompt, completion, answer, state, task, info)``
(awaited when it is a coroutine; the arguments it does not take are left out) gives the reward.
The rollout is replayed as the environment's own ``rollout`` makes it: for a ``MultiTurnEnv``
(its rows exported marked ``multi_turn``), ``setup_state``, then after each turn ``is_completed`` or
``max_turns`` ends it, else ``env_response`` answers; a third mode, ``step``, answers the turns so
far with the environment's next message, or with the reward once the rollout has ended. An
environment with tools (``oai_tools``, a ``ToolEnv``) has them listed in the exported system
prompt; a turn's ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks become its
assistant message's OpenAI tool calls.

Nothing here is trusted with the verdict's form: the host reads the numbers and checks them.
"""

import asyncio
import importlib
import inspect
import itertools
import json
import os
import re
import traceback
import types

SETTINGS = {}
_KEY = SETTINGS.pop("key")
_ANSWERS = os.dup(1)  # not inheritable: a child's descriptors never include it
os.dup2(2, 1)


def _answer(kind, value=None):
    line = f"{_KEY} {kind} {json.dumps(value)}\n".encode()
    while line:
        line = line[os.write(_ANSWERS, line) :]


def _config(vf):
    taskset_id = SETTINGS["taskset"]
    fields = {**SETTINGS["args"], "id": taskset_id}
    return vf.taskset_config_type(taskset_id).model_validate(fields)


def _messages(data):
    shown = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
    prompt = data.prompt
    if isinstance(prompt, str):
        return shown + [{"role": "user", "content": prompt}]
    for message in prompt or []:
        content = message.content if isinstance(message.content, str) else _text(message.content)
        shown.append({"role": message.role, "content": content})
    return shown


def _text(parts):
    return "\n".join(getattr(part, "text", "") for part in parts or [] if getattr(part, "text", ""))


def export(vf):
    taskset = vf.load_taskset(_config(vf))
    start = SETTINGS["skip"]
    rows = []
    for task in itertools.islice(iter(taskset), start, start + SETTINGS["size"]):
        rows.append(
            {
                "type": type(task).__name__,
                "key": task.key,
                "data": task.data.model_dump(mode="json", exclude_none=True),
                "messages": _messages(task.data),
            }
        )
    return {"rows": rows}


def _needs_runtime(function):
    parameter = inspect.signature(function).parameters.get("runtime")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _trace(vf, task):
    from verifiers.v1.configs.agent import WireAgentConfig
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask

    kinds = {"system": vf.SystemMessage, "user": vf.UserMessage, "assistant": vf.AssistantMessage}
    messages = [(kinds[m["role"]](content=m["content"]), False) for m in _messages(task.data)]
    messages += [(vf.AssistantMessage(content=text), True) for text in SETTINGS["turns"]]
    nodes = [
        MessageNode(parent=index - 1 if index else None, message=message, sampled=sampled)
        for index, (message, sampled) in enumerate(messages)
    ]
    info = TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash)
    return Trace(task=info, agent=AgentInfo(config=WireAgentConfig()), nodes=nodes, is_completed=True, ok=True)


def score(vf):
    config = _config(vf)
    task_type = vf.task_type(SETTINGS["taskset"])
    task = task_type(task_type.data_type().model_validate(SETTINGS["data"]), config=config.task)
    judges = [judge.reward_name for judge in task.plugged_judges()]
    if judges:
        return {"unsupported": "judges (" + ", ".join(judges) + ") need a model, which the sandbox cannot reach"}
    rewards = task.hooks("reward")
    skipped = [f.__name__ for f in rewards if _needs_runtime(f)]
    if len(skipped) == len(rewards):
        return {"unsupported": "every reward needs a runtime (" + ", ".join(skipped) + ") or there is none"}
    trace = _trace(vf, task)
    _answer("scoring")
    asyncio.run(task.score(trace))
    rewards = {
        name: None if reward is None else {"score": reward.score, "weight": reward.weight}
        for name, reward in trace.rewards.items()
    }
    return {"reward": trace.reward, "rewards": rewards, "metrics": trace.metrics, "skipped": skipped}


def _module():
    name = SETTINGS["taskset"].rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()
    return importlib.import_module(name)


def _plain(value):
    return json.loads(json.dumps(value, default=str))


TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _tools_text(tools):
    """How the model is told of an environment's tools (``oai_tools``) and how to call them."""
    lines = [
        "You may call these tools. To call one, write its name and arguments as a JSON object between "
        '<tool_call> and </tool_call>, e.g. <tool_call>{"name": "NAME", "arguments": {"ARG": VALUE}}</tool_call>; '
        "the results come back in the next message. Answer without a tool call when you are done.",
        "<tools>",
    ]
    lines += [json.dumps(tool, sort_keys=True) for tool in tools]
    return "\n".join(lines + ["</tools>"])


def _row_messages(row, environment):
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        shown = [{"role": m["role"], "content": m["content"]} for m in prompt]
    else:
        system = getattr(environment, "system_prompt", None)
        shown = [{"role": "system", "content": system}] if system else []
        shown += [{"role": "user", "content": str(prompt if prompt is not None else row.get("question", ""))}]
    tools = (row.get("info") or {}).get("oai_tools") or getattr(environment, "oai_tools", None)
    if tools:
        block = _tools_text(_plain(tools))
        if shown and shown[0]["role"] == "system":
            shown[0] = {"role": "system", "content": f"{shown[0]['content']}\n\n{block}"}
        else:
            shown.insert(0, {"role": "system", "content": block})
    return shown


def classic_export(module):
    environment = module.load_environment(**SETTINGS["args"])
    eval_rows = getattr(environment, "eval_dataset", None)
    split = SETTINGS.get("split", "auto")
    split = "eval" if split == "eval" or (split == "auto" and eval_rows is not None) else "train"
    rows = eval_rows if split == "eval" else environment.dataset
    if rows is None:
        raise SystemExit(f"the environment has no {'eval_dataset' if split == 'eval' else 'dataset'}")
    start, exported, multi = SETTINGS["skip"], [], _multi_turn(environment)
    for index, row in enumerate(itertools.islice(iter(rows), start, start + SETTINGS["size"]), start):
        row = dict(row)
        messages = _row_messages(row, environment)
        data = {
            "split": split,
            "idx": index,
            "prompt": messages,
            "answer": row.get("answer", ""),
            "info": row.get("info") or {},
            "task": row.get("task", "default"),
        }
        if row.get("example_id") is not None:
            data["example_id"] = row["example_id"]
        key = str(row.get("example_id", index))
        exported.append({"type": type(environment).__name__, "key": key, "data": _plain(data), "messages": messages})
        if multi:
            exported[-1]["multi_turn"] = True
    return {"rows": exported}


def _multi_turn(environment):
    """Whether the environment answers the model's turns (a MultiTurnEnv, not a SingleTurnEnv)."""
    import verifiers as vf

    multi = getattr(vf, "MultiTurnEnv", None)
    single = getattr(vf, "SingleTurnEnv", None)
    return multi is not None and isinstance(environment, multi) and not isinstance(environment, single or ())


class _Reply:
    """A model turn as a rollout's state keeps it (``state["responses"]``): a chat completion's shape."""

    def __init__(self, text, tool_calls=None):
        message = types.SimpleNamespace(role="assistant", content=text, tool_calls=tool_calls)
        finish = "tool_calls" if tool_calls else "stop"
        self.choices = [types.SimpleNamespace(index=0, message=message, text=text, finish_reason=finish)]


def _tool_calls(text, turn):
    """The tool calls a turn writes (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``),
    as the OpenAI objects a tool environment reads; a block that is not such a call is not one."""
    try:
        from openai.types.chat.chat_completion_message_tool_call import Function
        from verifiers.types import ChatCompletionMessageToolCall
    except ImportError:
        return []
    calls = []
    for block in TOOL_CALL.findall(text):
        try:
            call = json.loads(block)
        except ValueError:
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            continue
        arguments = call.get("arguments", {})
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
        function = Function(name=call["name"], arguments=arguments)
        calls.append(ChatCompletionMessageToolCall(id=f"call_{turn}_{len(calls)}", type="function", function=function))
    return calls


async def _maybe(value):
    return await value if inspect.isawaitable(value) else value


async def _replay(environment, data, turns):
    """The rollout of ``turns`` as the environment's own ``rollout`` makes it: after each model
    turn, ``is_completed`` or ``max_turns`` ends it, else ``env_response`` answers. A single-turn
    environment takes every turn as part of its completion. Returns the completion, the state,
    whether the rollout ended, and the environment's text after the last turn."""
    prompt = data.get("prompt")
    rollout, completion = list(prompt or []), []
    state = {
        "prompt": prompt,
        "completion": completion,
        "answer": data.get("answer", ""),
        "task": data.get("task", "default"),
        "info": data.get("info") or {},
        "responses": [],
        "turn": 0,
    }
    multi = _multi_turn(environment)
    if multi:
        state = await _maybe(environment.setup_state(state))
    done, shown = False, ""
    for text in turns:
        if done:
            break
        message = {"role": "assistant", "content": text}
        calls = _tool_calls(text, state["turn"]) if multi else []
        if calls:
            message["tool_calls"] = calls
        rollout.append(message)
        completion.append(message)
        state["responses"].append(_Reply(text, calls or None))
        state["turn"] += 1
        if not multi:
            continue
        if await _maybe(environment.is_completed(rollout, state)) or state["turn"] >= environment.max_turns:
            done, shown = True, ""
            continue
        answered, state = await _maybe(environment.env_response(rollout, state))
        answered = [answered] if isinstance(answered, dict) else list(answered)
        rollout += answered
        completion += answered
        shown = "\n\n".join(str(m.get("content") or "") for m in answered)
    state["completion"] = completion
    return completion, state, done or not multi, shown


async def _classic_reward(environment, data, completion, state):
    offered = {"prompt": data.get("prompt"), "completion": completion, "state": state}
    offered.update({k: state[k] for k in ("answer", "task", "info")})
    offered["example_id"] = data.get("example_id", data.get("idx"))
    score_rollout = environment.rubric.score_rollout
    accepted = inspect.signature(score_rollout).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
        offered = {k: v for k, v in offered.items() if k in accepted}
    result = await _maybe(score_rollout(**offered))
    reward = result.get("reward") if isinstance(result, dict) else getattr(result, "reward", None)
    metrics = result.get("metrics") if isinstance(result, dict) else getattr(result, "metrics", None)
    return {"reward": reward, "rewards": {}, "metrics": _plain(metrics or {}), "skipped": []}


async def _classic_score(environment):
    data = SETTINGS["data"]
    if _multi_turn(environment) and getattr(environment, "message_type", "chat") != "chat":
        return {"unsupported": "a multi-turn environment of completions (message_type completion): only chat ones run"}
    _answer("scoring")
    completion, state, done, shown = await _replay(environment, data, SETTINGS["turns"])
    if SETTINGS["mode"] == "step" and not done:
        return {"done": False, "observation": shown}
    result = await _classic_reward(environment, data, completion, state)
    return {**result, "done": done, "observation": shown}


def classic_score(module):
    """``score``: the reward of the replayed rollout; ``step``: the environment's answer to the
    last turn, or, once the rollout has ended, its reward (``done``)."""
    return asyncio.run(_classic_score(module.load_environment(**SETTINGS["args"])))


def run():
    module = _module()
    if hasattr(module, "load_environment"):
        return {"export": classic_export, "score": classic_score, "step": classic_score}[SETTINGS["mode"]](module)
    import verifiers.v1 as vf

    return {"export": export, "score": score}[SETTINGS["mode"]](vf)


def main():
    try:
        result = run()
    except Exception:
        _answer("error", traceback.format_exc()[-2000:])
        return
    _answer("answer", result)


main()
