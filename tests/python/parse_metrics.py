"""Parse /metrics with the Prometheus client's OpenMetrics parser (strict: it
rejects malformed exposition) and print every sample as JSON.

Usage: python3 parse_metrics.py < metrics.txt
Output: {"families": {name: type}, "samples": [{"name", "labels", "value"}]}
"""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

families = {}
samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    families[family.name] = family.type
    for s in family.samples:
        samples.append({"name": s.name, "labels": s.labels, "value": s.value})
json.dump({"families": families, "samples": samples}, sys.stdout)
