"""Serves an OpenEnv environment's ASGI app on a Unix socket; runs inside the sandbox.

Run by the interpreter of a built environment (standard library and the environment's own
packages only: uvicorn and the app's): ``python _serve_app.py APP SOCKET [SOURCE_DIR]``. ``APP``
is ``module:attribute`` (the app) or ``module:attribute()`` (a factory called without
arguments to make it); ``SOURCE_DIR``, when given, comes first on ``sys.path``. A module that
does not import, or an attribute it lacks, ends the process with its traceback on stderr.
"""

import importlib
import sys


def load(reference):
    module_name, _, attribute = reference.partition(":")
    factory = attribute.endswith("()")
    app = importlib.import_module(module_name)
    for part in attribute.removesuffix("()").split("."):
        app = getattr(app, part)
    return app() if factory else app


def main():
    reference, socket_path = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        sys.path.insert(0, sys.argv[3])
    app = load(reference)
    import uvicorn

    uvicorn.run(app, uds=socket_path, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
