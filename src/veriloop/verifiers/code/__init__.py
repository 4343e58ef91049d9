"""Verifier kinds that run the response as code: ``python_tests`` (a function against the task's
own tests and dynamic tests, HumanEval style) and ``stdio`` (a whole program against stdin and
expected stdout). Untrusted code runs only in ``veriloop.sandbox``, in scripts that ``_scripts``
builds from the modules in ``sandboxed/``; expected outputs stay on the host, which computes the
verdict. Importing a module registers its kinds; this package itself imports nothing.
"""

__all__: list[str] = []
