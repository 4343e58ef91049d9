"""Code that runs inside the sandbox on the CAD environment (numpy, trimesh and manifold3d
installed), shipped as source and read by the host; never imported by the host itself."""

__all__: list[str] = []
