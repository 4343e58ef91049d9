"""Code that runs inside the sandbox, on a built environment's interpreter: standard library and
that environment's packages only, shipped as source (``serve_app.py``)."""
