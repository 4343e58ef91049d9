"""What runs inside the sandbox: the server that forks one child per run.

Everything in this folder is standard library only (Python >= 3.9) and never imports
veriloop: the host joins the modules' source into one script (``_bwrap.SERVER_MODULES``, their
``# sandbox: strip`` imports of each other removed: ``sandbox/_shipped.py``) and ships it into
the sandbox as text (``python3 -I -c <script>``), where neither veriloop nor its dependencies
exist. Nothing here is imported on the host.
"""

__all__ = []
