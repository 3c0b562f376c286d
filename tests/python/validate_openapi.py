"""Validate an OpenAPI document with openapi-spec-validator (OpenAPI 3.1 rules).

Usage: python3 validate_openapi.py FILE   -- prints `valid: <version>` or the error, exit 1.
"""

import json
import sys

from openapi_spec_validator import OpenAPIV31SpecValidator, validate

with open(sys.argv[1], encoding="utf-8") as f:
    doc = json.load(f)
try:
    validate(doc, cls=OpenAPIV31SpecValidator)
except Exception as e:  # the validator's own error types carry the path of the fault
    print(f"invalid: {e}")
    sys.exit(1)
print(f"valid: {doc['openapi']}")
