"""Runs a verifiers taskset inside the sandbox, on an environment that holds ``verifiers`` and
the taskset's package; prints one JSON line, the last of its output.

The host (``_taskset.py``) fills in ``SETTINGS`` before sending this source. Two modes:

- ``export``: the taskset's tasks ``skip`` to ``skip + size`` (in ``load()`` order), each as its
  task type's name, its key, its data as JSON (the wire form verifiers writes on its traces) and
  the messages that open it (the system prompt, then the prompt);
- ``score``: the task rebuilt from its data, a trace made of the task's messages and the model's
  turns (``turns``; each one an assistant message the model produced, in order), and the task's
  own ``score`` run on it without a runtime, as verifiers' offline replay does: the reward is
  the weighted sum of the task's rewards. Rewards that need a runtime cannot run here and are
  listed apart (``unsupported`` when that is all of them); a task with judges is
  ``unsupported``: they need a model this sandbox cannot reach.

Nothing here is trusted with the verdict's form: the host reads the numbers and checks them.
"""

import asyncio
import inspect
import itertools
import json

SETTINGS = {}


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
    asyncio.run(task.score(trace))
    rewards = {
        name: None if reward is None else {"score": reward.score, "weight": reward.weight}
        for name, reward in trace.rewards.items()
    }
    return {"reward": trace.reward, "rewards": rewards, "metrics": trace.metrics, "skipped": skipped}


def main():
    import verifiers.v1 as vf

    result = {"export": export, "score": score}[SETTINGS["mode"]](vf)
    print("\n" + json.dumps(result))


main()
