"""A tool-using agent written against the plain OpenAI client, with nothing of veriloop in it.

It asks the model, runs the calculator whenever the model calls it, sends the result back, and
returns (as a script: prints) the model's final answer. The client reads OPENAI_BASE_URL and OPENAI_API_KEY from the
environment, as every OpenAI client does; the model name is OPENAI_MODEL, else the first model
the endpoint lists. The question comes on standard input.

    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=x python calculator_agent.py <<< "What is 17 * 23?"
"""

import ast
import json
import operator
import os
import sys

from openai import OpenAI

SYSTEM = "Answer the question. Use the calculator for arithmetic. Reply with the number only."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression of integers with + - * and parentheses.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "e.g. 17 * 23"}},
                "required": ["expression"],
            },
        },
    }
]
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.USub: operator.neg}


def calculator(expression: str) -> str:
    """The value of an integer expression, read as a syntax tree (never evaluated as code)."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("only integers, + - * and parentheses")

    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, RecursionError) as exc:
        return f"error: {exc}"


def solve(question: str) -> str:
    """Ask the model, run its calculator calls, and return its final answer."""
    client = OpenAI()
    model = os.environ.get("OPENAI_MODEL") or client.models.list().data[0].id
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    for _ in range(4):  # at most three rounds of tool calls, then an answer
        reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=64)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                result = calculator(**json.loads(call.function.arguments))
            except (TypeError, ValueError) as exc:
                result = f"error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return messages[-1]["content"]


if __name__ == "__main__":
    print(solve(sys.stdin.read()))
