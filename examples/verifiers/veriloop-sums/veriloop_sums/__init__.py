"""One-digit sums as a verifiers taskset: the answer in <answer> tags earns 0.75, a short
reply 0.25 (two weighted rewards, so partial credit shows)."""

import re

import verifiers.v1 as vf


class SumsData(vf.TaskData):
    answer: str


class SumsTask(vf.Task[SumsData]):
    @vf.reward(weight=0.75)
    async def correct(self, task: SumsData, trace) -> float:
        found = re.findall(r"<answer>(.*?)</answer>", trace.last_reply, re.S)
        return float(len(found) == 1 and found[0].strip() == task.answer)

    @vf.reward(weight=0.25)
    async def brief(self, trace) -> float:
        return float(len(trace.last_reply) <= 40)


class SumsTaskset(vf.Taskset[SumsTask]):
    def load(self):
        for a in range(1, 10):
            b = (a * 7) % 10
            prompt = f"What is {a} + {b}? Give the result inside <answer></answer>."
            yield SumsTask(
                SumsData(id=f"sum-{a}-{b}", prompt=prompt, system_prompt="Answer briefly.", answer=str(a + b)),
                self.config.task,
            )


__all__ = ["SumsTask", "SumsTaskset"]
