"""Verify Gatehouse receipts offline: `python3 verify_receipt.py PUBLIC_KEY_B64 RECEIPT.json...`

Each file holds the `data` of `GET /api/receipts/{bundle_id}` (or the whole answer). Needs PyNaCl
(`pip install pynacl`). Prints one line per file and exits non-zero if any fails to verify.
"""

import base64
import hashlib
import json
import sys

import nacl.exceptions
import nacl.signing


def verify(public_key_b64: str, r: dict) -> bool:
    key = nacl.signing.VerifyKey(base64.b64decode(public_key_b64))
    msg = json.dumps(r["receipt"], sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if "batch" in r:  # signed with the other receipts of its commit: fold the path to the root
        h = hashlib.sha256(b"\x00" + msg).digest()
        for step in r["batch"]["path"]:
            sib = bytes.fromhex(step["hash"])
            h = hashlib.sha256(b"\x01" + (sib + h if step["side"] == "left" else h + sib)).digest()
        if h.hex() != r["batch"]["root"]:
            return False
        msg = ("gatehouse-receipts-v1:" + r["batch"]["root"]).encode()
    try:
        key.verify(msg, base64.b64decode(r["signature"]))
        return True
    except nacl.exceptions.BadSignatureError:
        return False


if __name__ == "__main__":
    ok = 0
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        r = r.get("data", r)
        good = verify(sys.argv[1], r)
        ok += good
        form = "batch of a commit" if "batch" in r else "signed alone"
        print(f"{path}: {'verified' if good else 'FAILED'} ({form})")
    print(f"{ok} passed, {len(sys.argv) - 2 - ok} failed")
    sys.exit(0 if ok == len(sys.argv) - 2 else 1)
