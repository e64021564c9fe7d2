"""The sidecar: a random token per start, served at /token and written to the shared volume."""

import http.server
import os
import secrets

TOKEN = secrets.token_hex(16)
with open("/data/token.txt", "w") as f:
    f.write(TOKEN + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (TOKEN if self.path == "/token" else "not found").encode()
        self.send_response(200 if self.path == "/token" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


port = int(os.environ.get("KEEPER_PORT", "8080"))
http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
