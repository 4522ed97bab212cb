"""Write deploy/vgate.yaml: the Helm chart (charts/vgate) rendered with its default values; first the
files derived from the example config (the chart's ``config`` value, the Rego tests' config).

The chart is the one source of vgate's manifests; deploy/ is its plain rendering for operators
who apply with kustomize (`kubectl apply -k deploy/`). tests/server/test_chart.py fails when
deploy/vgate.yaml is not what this script writes now. Needs helm-python-sdk (Helm's own engine,
no helm binary): `pip install -e '.[test]'`, then `python deploy/render.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "vgate"
NAMESPACE = "vgate-system"


def render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE,
           release: str = "vgate") -> list[dict[str, Any]]:
    """The chart's objects for ``values``, as `helm template <release> charts/vgate -n <namespace>` gives them."""
    manifests = helm.Chart.load(CHART).render(values or {}, name=release, namespace=namespace, is_install=True)
    return [document for path, text in sorted(manifests.items()) if not path.endswith("NOTES.txt")
            for document in yaml.safe_load_all(text) if document]


# deploy/ takes cert-manager's certificate: kustomize users have cert-manager, and its manifests then
# need no Secret that vgate writes (the chart's default keeps vgate's own).
DEPLOY_VALUES: dict[str, Any] = {"certManager": {"enabled": True}}


def notes(values: dict[str, Any] | None = None, namespace: str = NAMESPACE, release: str = "vgate") -> str:
    """What `helm install` prints after installing (the chart's NOTES.txt, rendered)."""
    manifests = helm.Chart.load(CHART).render(values or {}, name=release, namespace=namespace, is_install=True)
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def plain() -> str:
    header = ("# Rendered from charts/vgate by deploy/render.py with its default values and certManager.enabled=true "
              "(cert-manager issues the serving certificate and injects the CA): edit the chart, not this.\n")
    return header + "---\n".join(yaml.safe_dump(document, sort_keys=False) for document in render(DEPLOY_VALUES))


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT))
    from webhook.files.example_config import derived_files

    for path, text in derived_files(ROOT).items():  # the chart's config and the Rego tests' first
        path.write_text(text)
    (ROOT / "deploy" / "vgate.yaml").write_text(plain())
