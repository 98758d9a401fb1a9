"""A local stand-in for Sentry's envelope endpoint, on 127.0.0.1 only.

It parses every POST as an envelope (https://develop.sentry.dev/sdk/envelopes/)
strictly: the header line, then items whose `length` must match their payload
exactly, each followed by a newline. It checks the auth header and the URL the
DSN implies, and records what it received. `fail_with` makes it answer with an
error status (to test retries).
"""
import http.server
import json
import re
import threading


class Envelope:
    def __init__(self, header, items, path, headers):
        self.header = header
        self.items = items  # [(item header dict, payload bytes)]
        self.path = path
        self.headers = headers

    def of_type(self, t, attachment_type=None):
        return [(h, p) for h, p in self.items
                if h.get("type") == t and (attachment_type is None or h.get("attachment_type", "event.attachment") == attachment_type)]

    @property
    def event(self):
        (h, p), = self.of_type("event")
        return json.loads(p)


def parse_envelope(body):
    """Parses envelope bytes strictly; raises ValueError on any framing error."""
    nl = body.index(b"\n")
    header = json.loads(body[:nl])
    pos = nl + 1
    items = []
    while pos < len(body):
        nl = body.index(b"\n", pos)
        h = json.loads(body[pos:nl])
        pos = nl + 1
        if "length" not in h:
            raise ValueError("item without length: %r" % h)
        n = h["length"]
        payload = body[pos:pos + n]
        if len(payload) != n:
            raise ValueError("item shorter than its length")
        pos += n
        if pos < len(body):
            if body[pos:pos + 1] != b"\n":
                raise ValueError("item payload not followed by a newline")
            pos += 1
        items.append((h, payload))
    return Envelope(header, items, None, None)


class FakeSentry:
    def __init__(self, project="42", key="publickey", port=0):
        self.project = project
        self.key = key
        self.envelopes = []
        self.errors = []  # what the server found wrong
        self.requests = 0
        # statuses (or (status, {header: value})) to answer with, one per
        # request, before accepting
        self.fail_with = []
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                status = outer._handle(self.path, dict(self.headers), body)
                status, extra = status if isinstance(status, tuple) else (status, {})
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def envelope_url(self):
        return "http://127.0.0.1:%d/api/%s/envelope/" % (self.port, self.project)

    @property
    def dsn(self):
        return "http://%s@127.0.0.1:%d/%s" % (self.key, self.port, self.project)

    def _error(self, what):
        self.errors.append(what)
        return 400

    def _handle(self, path, headers, body):
        with self._lock:
            self.requests += 1
            if self.fail_with:
                return self.fail_with.pop(0)
            if path != "/api/%s/envelope/" % self.project:
                return self._error("wrong path " + path)
            if headers.get("Content-Type") != "application/x-sentry-envelope":
                return self._error("content type " + str(headers.get("Content-Type")))
            auth = headers.get("X-Sentry-Auth", "")
            fields = dict(re.findall(r"(sentry_\w+)=([^,\s]+)", auth))
            if not auth.startswith("Sentry ") or fields.get("sentry_key") != self.key or \
                    fields.get("sentry_version") != "7" or "sentry_client" not in fields:
                return self._error("auth header " + auth)
            try:
                env = parse_envelope(body)
            except (ValueError, json.JSONDecodeError) as e:
                return self._error("framing: %s" % e)
            env.path, env.headers = path, headers
            self.envelopes.append(env)
            return 200

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
