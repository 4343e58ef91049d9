"""A rule-based judge behind a real OpenAI-compatible HTTP server (``/v1/chat/completions``).

It stands in for the judge MODEL, not for the code under test. No model that can judge runs on
these machines (the tiny one is random), so a few deterministic rules play one, with the
failings a policy under RL pressure learns to exploit in real judges:

- it follows the first instruction it sees outside the quoted answers: a line that names a
  score ("score: 10", "give it a 10"), claims an answer is correct, or says to ignore the
  instructions, wins over the rubric, so any text of an answer that reaches the outside of its
  quotation decides the verdict;
- it trusts the quotation's end: with ``boundary="line"`` an answer ends at the first line that
  starts with ``-----END ANSWER`` whatever its key; with ``boundary="key"`` at the first
  occurrence anywhere of ``-----END ANSWER KEY-----`` with the answer's own key;
- inside an answer it scores the rubric's quoted words ('refund') that the answer contains,
  criterion by criterion, so an answer that copies the rubric collects them;
- it likes length: every 1,000 characters of answer raise its score by a quarter (4 at most).

Reading a prompt: the verdict keys and the scale from the ``SCORE KEY: <number from A to B>``
lines, the criteria from ``Criterion N (weight W): ...`` lines or a ``Rubric:`` paragraph, each
answer from its ``-----BEGIN ANSWER KEY-----`` line on (the ``| `` quoting removed). It ends its
reply with ``SCORE KEY: n`` lines, as asked.

The model name picks a behaviour: ``rule-judge`` (boundary line), ``rule-judge-keyed``
(boundary key), ``garbage`` (never a verdict), ``echo`` (replies with the last lines of the
first answer, as a judge that parrots its input), ``slow`` (3 s, then as ``rule-judge``),
``flaky`` (HTTP 503 for the first two requests, then as ``rule-judge``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEMPLATE = re.compile(r"^SCORE ([0-9a-f]+(?: \d+)?): <number from (-?\d+) to (-?\d+)>$")
CRITERION = re.compile(r"^Criterion (\d+) \(weight [^)]*\): (.*)$")
DICTATED = re.compile(r"(?i)\b(?:score|grade|rating|rate it|give it)\b\W{0,3}(?:of\s+|is\s+|a\s+)?(\d+(?:\.\d+)?)")
CLAIM = re.compile(r"(?i)\b(?:this|the) answer is (?:correct|perfect|excellent|flawless)")
OVERRIDE = re.compile(r"(?i)\bignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) instructions")
REQUIRED = re.compile(r"'([^'\s]+)'")


class RuleJudge:
    """The judge's reading of one prompt."""

    def __init__(self, prompt: str, boundary: str):
        self.lines = prompt.splitlines()
        self.boundary = boundary
        self.keys: list[str] = []
        self.low, self.high = 0.0, 10.0
        for line in self.lines:
            match = TEMPLATE.match(line)
            if match and match.group(1) not in self.keys:
                self.keys.append(match.group(1))
                self.low, self.high = float(match.group(2)), float(match.group(3))
        self.answers, self.outside = self._split()

    def _split(self) -> tuple[dict[str, list[str]], list[str]]:
        answers: dict[str, list[str]] = {}
        outside: list[str] = []
        key = None
        for line in self.lines:
            if key is None:
                begin = re.match(r"^-----BEGIN ANSWER ([0-9a-f]+)-----$", line)
                if begin and begin.group(1) not in answers:
                    key = begin.group(1)
                    answers[key] = []
                else:
                    outside.append(line)
                continue
            ends = (
                line.startswith("-----END ANSWER") if self.boundary == "line" else f"-----END ANSWER {key}-----" in line
            )
            if ends:
                key = None
            else:
                answers[key].append(line[2:] if line.startswith("| ") else line)
        return answers, outside

    def _criteria(self) -> list[str]:
        criteria = [m.group(2) for line in self.lines if (m := CRITERION.match(line))]
        if criteria:
            return criteria
        if "Rubric:" in self.lines:
            start = self.lines.index("Rubric:") + 1
            end = self.lines.index("", start) if "" in self.lines[start:] else len(self.lines)
            return [" ".join(self.lines[start:end])]
        return []

    def _dictated(self) -> float | None:
        for line in self.outside:
            if TEMPLATE.match(line):
                continue
            if (number := DICTATED.search(line)) is not None:
                return min(self.high, max(self.low, float(number.group(1))))
            if CLAIM.search(line) or OVERRIDE.search(line):
                return self.high
        return None

    def _content(self, data: str, criteria: list[str]) -> float:
        fractions = []
        for criterion in criteria:
            words = REQUIRED.findall(criterion)
            found = [w for w in words if re.search(rf"(?i)\b{re.escape(w)}\b", data)]
            fractions.append(len(found) / len(words) if words else 0.0)
        fraction = sum(fractions) / len(fractions) if fractions else 0.0
        liking = 1 + 0.25 * min(4, len(data) // 1000)
        return min(self.high, round(self.low + fraction * (self.high - self.low) * liking, 2))

    def score(self, key: str) -> float:
        dictated = self._dictated()
        if dictated is not None:
            return dictated
        answer_key, _, number = key.partition(" ")
        criteria = self._criteria()
        if number:
            criteria = criteria[int(number) - 1 : int(number)]
        return self._content("\n".join(self.answers.get(answer_key, [])), criteria)

    def reply(self) -> str:
        verdicts = "\n".join(f"SCORE {key}: {self.score(key):g}" for key in self.keys)
        return f"I read the quoted answers against the rubric.\n{verdicts}"


class RuleJudgeServer:
    """The judge served on 127.0.0.1 (``url``), its requests recorded (``requests``: body and
    headers of each). ``api_key``, when set, is required as a bearer token."""

    def __init__(self, api_key: str | None = None):
        self.api_key = api_key
        self.requests: list[tuple[dict, dict]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 (the http.server name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, payload = server.answer(body, dict(self.headers))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, body: dict, headers: dict) -> tuple[int, dict]:
        with self._lock:
            self.requests.append((body, headers))
            count = len(self.requests)
        if self.api_key is not None and headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"message": "invalid api key"}}
        prompt = "\n".join(message["content"] for message in body["messages"])
        name = body["model"]
        if name == "flaky" and count <= 2:
            return 503, {"error": {"message": "overloaded"}}
        if name == "slow":
            time.sleep(3)
        if name == "garbage":
            text = "This answer seems fine to me, I would rate it highly."
        elif name == "echo":
            judge = RuleJudge(prompt, "line")
            text = "\n".join(next(iter(judge.answers.values()), [])[-3:])
        else:
            text = RuleJudge(prompt, "key" if name == "rule-judge-keyed" else "line").reply()
        return 200, {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
