"""Code that runs inside the sandbox on an OpenEnv app's built environment (uvicorn and the app's
packages installed), shipped as source and read by the host (``_serve_app.py``); never imported
by the host itself."""

__all__: list[str] = []
