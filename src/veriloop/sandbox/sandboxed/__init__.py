"""What runs inside the sandbox: the server that forks one child per run.

Everything in this folder is standard library only (Python >= 3.9) and never imports
veriloop: the host reads each module's source and ships it into the sandbox as text
(``python3 -I -c <source>``), where neither veriloop nor its dependencies exist.
Nothing here is imported on the host.
"""

__all__ = []
