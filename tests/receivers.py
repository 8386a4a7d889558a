"""Real receivers on loopback for alert tests: an SMTP server (aiosmtpd) and a webhook."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


class Auth:
    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user.encode(), password.encode()
        self.logins: list[bytes] = []

    def __call__(self, server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == self.user
            and auth_data.password == self.password
        )
        if ok:
            self.logins.append(auth_data.login)
        return AuthResult(success=ok, handled=False)


def smtp_server(port: int, auth: Auth | None = None) -> tuple[Controller, Mailbox]:
    box = Mailbox()
    opts = {"authenticator": auth, "auth_require_tls": False, "auth_required": True} if auth else {}
    ctl = Controller(box, hostname="127.0.0.1", port=port, **opts)
    ctl.start()
    return ctl, box


class Webhook:
    """A tiny HTTP receiver that records JSON bodies and answers `status`."""

    def __init__(self, port: int = 0, status: int = 200) -> None:
        self.bodies: list[dict] = []
        self.status = status
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hook.bodies.append(
                    {"json": json.loads(body), "auth": self.headers.get("Authorization")}
                )
                self.send_response(hook.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
