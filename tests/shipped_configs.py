"""The configs the repository ships, each as the files a user passes to ``--configfile``.

Most are whole configs; the overlays (``prompt.yaml`` on ``default.yaml``, ``ci-vllm.yaml``
on ``ci.yaml``, ...; each header says so) are layered on the config they change. Tests that check every shipped config iterate over ``SHIPPED``.
"""

from pathlib import Path

import yaml

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"

#: Overlay file -> the config it is layered on.
OVERLAYS = {
    "prompt.yaml": "default.yaml",
    "replicate.yaml": "default.yaml",
    "world-check.yaml": "default.yaml",
    "beyond.yaml": "default.yaml",
    "dev.yaml": "default.yaml",
    "ci-vllm.yaml": "ci.yaml",
}

SHIPPED: list[tuple[Path, ...]] = [
    (CONFIG_DIR / OVERLAYS[p.name], p) if p.name in OVERLAYS else (p,) for p in sorted(CONFIG_DIR.glob("*.yaml"))
]


def layers_id(layers: tuple[Path, ...]) -> str:
    return "+".join(p.name for p in layers)


def raw_config(layers: tuple[Path, ...]) -> dict:
    """The layered YAML as Snakemake merges ``--configfile a b``, before any default is filled."""
    from snakemake.utils import update_config

    config: dict = {}
    for path in layers:
        update_config(config, yaml.safe_load(path.read_text()))
    return config
