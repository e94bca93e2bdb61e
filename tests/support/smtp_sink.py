"""A real SMTP server on loopback for Steward's tests (aiosmtpd).

Prints the port it listens on, then serves until stdin closes or it is killed. Every accepted
message is appended to --log as one JSON line (Message-ID, envelope sender and recipients) and,
with --sent-maildir, stored in that Maildir the way a person's sync tool would file the Sent copy.

Behaviours for failure tests:
  --reject-rcpt ADDR   answer 550 to RCPT TO:<ADDR>
  --auth USER:PASS     require AUTH (PLAIN/LOGIN) with these credentials
  --tls implicit|starttls --tls-cert PEM --tls-key PEM
                       TLS from the first byte, or STARTTLS required before MAIL
  --after-data MODE    accept | hang (store, never answer) | drop (store, close without answer)
                       | reject (answer 554, store nothing)
"""

import argparse
import asyncio
import email
import json
import logging
import os
import socket
import sys
import threading
import time
import warnings

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Handler:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.counter = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.args.reject_rcpt and address.lower() == self.args.reject_rcpt.lower():
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    def store(self, envelope):
        data = envelope.original_content or envelope.content
        if isinstance(data, str):
            data = data.encode()
        msg = email.message_from_bytes(data)
        with self.lock:
            self.counter += 1
            n = self.counter
            with open(self.args.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({
                    "message_id": (msg.get("Message-ID") or "").strip(),
                    "mail_from": envelope.mail_from,
                    "rcpt_tos": envelope.rcpt_tos,
                    "bcc_header": msg.get("Bcc"),
                }) + "\n")
                f.flush()
                os.fsync(f.fileno())
            if self.args.sent_maildir:
                base = self.args.sent_maildir
                for sub in ("tmp", "new", "cur"):
                    os.makedirs(os.path.join(base, sub), exist_ok=True)
                name = f"{time.time_ns()}.{os.getpid()}_{n}.sink"
                tmp = os.path.join(base, "tmp", name)
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.rename(tmp, os.path.join(base, "cur", name + ":2,S"))

    async def handle_DATA(self, server, session, envelope):
        mode = self.args.after_data
        if mode == "reject":
            return "554 5.7.1 Message rejected"
        self.store(envelope)
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "drop":
            server.transport.close()
            await asyncio.sleep(0.5)
        return "250 2.0.0 Ok: queued"


class Authenticator:
    def __init__(self, user, password):
        self.user = user.encode()
        self.password = password.encode()

    def __call__(self, server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == self.user
            and auth_data.password == self.password
        )
        # handled=False: the server answers 535 itself on a failure.
        return AuthResult(success=ok, handled=False)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    # AUTH without TLS is what the tests want on loopback.
    warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
    # The TLS tests send a ClientHello to plain-text servers on purpose; aiosmtpd would log its
    # raw bytes ("unrecognised: …") into the test output.
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--sent-maildir")
    p.add_argument("--reject-rcpt")
    p.add_argument("--auth")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--tls", choices=["implicit", "starttls"])
    p.add_argument("--after-data", default="accept",
                   choices=["accept", "hang", "drop", "reject"])
    args = p.parse_args()
    kwargs = {}
    if args.auth:
        user, password = args.auth.split(":", 1)
        kwargs.update(authenticator=Authenticator(user, password), auth_required=True,
                      auth_require_tls=False)
    if args.tls:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls == "implicit":
            kwargs["ssl_context"] = ctx
        else:
            kwargs.update(tls_context=ctx, require_starttls=True)
    port = free_port()
    controller = Controller(Handler(args), hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    print(port, flush=True)
    try:
        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
