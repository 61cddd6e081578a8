#!/usr/bin/env python3
"""Credentials for the cloud lanes' direct and nginx baselines (bench/run.sh, lanes b64 bs64
v64 vs64): what a client calling Bedrock or Vertex itself would do. Python 3 stdlib (plus the
`openssl` command for the RS256 assertion).

  cloud_auth.py sigv4 --host HOST --path PATH --body BODY [--header 'name: value' ...]
      Signs one POST with AWS SigV4 (signing name `bedrock`, region `--region`, default
      us-east-1) at the current time and prints the headers to add, one a line:
      `x-amz-date: …` and `authorization: AWS4-HMAC-SHA256 …`. The signed headers are
      `host`, `x-amz-date` and every `--header` given (send them with the same values).
      The path is signed as sent, encoded once more (a model id's `%3A` is signed as
      `%253A`), as the AWS SDKs and the gateway do. Keys: `--access-key` / `--secret-key`,
      default the AWS documentation's example pair the mock accepts (not a secret).
      A fixed signature stays valid while its `x-amz-date` is within 5 minutes of the
      verifier's clock, so run.sh signs again right before each load run (≤ a few seconds).

  cloud_auth.py vertex-token --sa FILE [--token-url URL]
      The service-account JWT-bearer flow, once: an RS256 assertion (`openssl dgst -sha256
      -sign`) for scope cloud-platform posted to the account's `token_uri` (or URL); prints
      the access token.
"""
import argparse
import base64
import datetime
import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

EXAMPLE_AKID = "AKIDEXAMPLE"
EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~"


def uri_encode(s):
    return "".join(c if c in UNRESERVED else "".join(f"%{b:02X}" for b in c.encode()) for c in s)


def sigv4(a):
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    path, _, query = a.path.partition("?")
    # Canonical URI: each segment encoded again (the signer's "double" mode).
    canon_uri = "/".join(uri_encode(seg) for seg in path.split("/")) or "/"
    canon_query = "&".join(sorted(
        f"{uri_encode(urllib.parse.unquote(k))}={uri_encode(urllib.parse.unquote(v))}"
        for k, _, v in (p.partition("=") for p in query.split("&") if p)))
    headers = {"host": a.host, "x-amz-date": amz_date}
    for h in a.header:
        k, _, v = h.partition(":")
        headers[k.strip().lower()] = " ".join(v.split())
    names = sorted(headers)
    canon_headers = "".join(f"{n}:{headers[n]}\n" for n in names)
    signed = ";".join(names)
    body_hash = hashlib.sha256(a.body.encode()).hexdigest()
    creq = "\n".join(["POST", canon_uri, canon_query, canon_headers, signed, body_hash])
    scope = f"{day}/{a.region}/{a.service}/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + a.secret_key).encode()
    for part in (day, a.region, a.service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    print(f"x-amz-date: {amz_date}")
    print(f"authorization: AWS4-HMAC-SHA256 Credential={a.access_key}/{scope}, "
          f"SignedHeaders={signed}, Signature={sig}")


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def vertex_token(a):
    sa = json.load(open(a.sa))
    url = a.token_url or sa["token_uri"]
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT"}
    if sa.get("private_key_id"):
        header["kid"] = sa["private_key_id"]
    claims = {"iss": sa["client_email"], "scope": "https://www.googleapis.com/auth/cloud-platform",
              "aud": url, "iat": now, "exp": now + 3600}
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        f.write(sa["private_key"])
        key = f.name
    try:
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input.encode(),
                             capture_output=True, check=True).stdout
    finally:
        os.unlink(key)
    form = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                   "assertion": f"{signing_input}.{b64url(sig)}"}).encode()
    req = urllib.request.Request(url, data=form,
                                 headers={"content-type": "application/x-www-form-urlencoded"})
    print(json.load(urllib.request.urlopen(req, timeout=10))["access_token"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sigv4")
    s.add_argument("--host", required=True)
    s.add_argument("--path", required=True)
    s.add_argument("--body", required=True)
    s.add_argument("--header", action="append", default=[])
    s.add_argument("--region", default="us-east-1")
    s.add_argument("--service", default="bedrock")
    s.add_argument("--access-key", default=EXAMPLE_AKID)
    s.add_argument("--secret-key", default=EXAMPLE_SECRET)
    v = sub.add_parser("vertex-token")
    v.add_argument("--sa", required=True)
    v.add_argument("--token-url")
    a = ap.parse_args()
    try:
        sigv4(a) if a.cmd == "sigv4" else vertex_token(a)
    except Exception as e:  # noqa: BLE001 - a one-shot helper: say what failed and stop
        print(f"cloud_auth.py {a.cmd}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
