# Spack recipe for iolens: `spack repo add deploy/spack` is not needed; copy this folder
# into a site repo (repos/<name>/packages/py-iolens/). Version and dependencies mirror
# pyproject.toml; tests/deploy/test_spack_recipe.py fails when they drift apart.
from spack.package import *


class PyIolens(PythonPackage):
    """End-to-end I/O monitoring and diagnosis for HPC clusters: a node agent and
    LD_PRELOAD tracer on every node (the default), and with +server the store, the
    analyses, the ingest server and the web UI."""

    pypi = "iolens/iolens-0.1.0.tar.gz"

    license("Apache-2.0")

    # No checksum until the sdist is published: `spack checksum py-iolens` then, or
    # `spack install --no-checksum` from a site mirror holding `python -m build`'s sdist.
    version("0.1.0")

    variant(
        "server",
        default=False,
        description="Store, analyses, ingest server and web UI (iolens[server]); "
        "without it, the node agent, the Slurm hook and the tracer",
    )

    # setup.py compiles the LD_PRELOAD tracer into iolens/_lib/libiolens.so.
    depends_on("c", type="build")
    depends_on("python@3.11:", type=("build", "run"))
    depends_on("py-setuptools@77:", type="build")
    depends_on("py-wheel", type="build")

    # The base install: the node agent (iolens[agent]).
    depends_on("py-pydantic@2.6:", type=("build", "run"))
    depends_on("py-rich@13.7:", type=("build", "run"))
    depends_on("py-typer@0.12:", type=("build", "run"))

    with when("+server"):
        depends_on("py-duckdb@1.1:", type=("build", "run"))
        depends_on("py-pyarrow@16:", type=("build", "run"))
        depends_on("py-numpy@1.26:", type=("build", "run"))
        depends_on("py-zstandard@0.22:", type=("build", "run"))
        depends_on("py-fastapi@0.110:", type=("build", "run"))
        depends_on("py-uvicorn@0.29:", type=("build", "run"))
        depends_on("py-uvloop@0.19:", type=("build", "run"))
        depends_on("py-httptools@0.6:", type=("build", "run"))
        depends_on("py-httpx@0.27:", type=("build", "run"))
        depends_on("py-prometheus-client@0.20:", type=("build", "run"))
        depends_on("py-pywavelets@1.6:", type=("build", "run"))
        depends_on("py-scikit-learn@1.4:", type=("build", "run"))
        depends_on("py-pandas@2.1:", type=("build", "run"))
        depends_on("py-darshan@3.4:", type=("build", "run"))
        depends_on("py-cffi@1.15:", type=("build", "run"))
        depends_on("py-jinja2@3.1:", type=("build", "run"))
        depends_on("py-matplotlib@3.8:", type=("build", "run"))

    # Import checks `spack test run` makes: the agent's modules always, the server's with
    # +server.
    @property
    def import_modules(self):
        modules = ["iolens", "iolens.collect.runner", "iolens.ship.wire"]
        if self.spec.satisfies("+server"):
            modules += ["iolens.store", "iolens.present.cli.main"]
        return modules
