"""Drives one headless LibreOffice through UNO for the e2e tests: one request a line on stdin (JSON), one
answer a line on stdout ({"ok": ...} or {"error": "..."}).

Started as `python3 libreoffice-driver.py PROFILE_DIR`: runs `soffice --headless` with its own user profile
in PROFILE_DIR (no first-start wizard, no recovery, no other LibreOffice disturbed), connects over a pipe,
and answers once ready ({"ok": "ready", "group": G}: LibreOffice's processes are the process group G, which
the driver ends at its own end, and its caller if the driver cannot). Requests:

  {"op": "new", "path": P, "text": T}   a Writer document holding T, stored as ODF at P, closed
  {"op": "open", "path": P}             loads P for editing, as a person opening it does (lock file and all)
  {"op": "open", "url": U, "user": N, "password": W}
                                        the same for a WebDAV URL (vnd.sun.star.webdav://HOST:PORT/…), logging
                                        in as N
  {"op": "edit", "text": T}             replaces the text of the open document with T
  {"op": "store"}                       saves the open document in place (Ctrl+S)
  {"op": "close"}                       closes the open document
  {"op": "text", "path": P}             the text of P, opened read-only and closed again (or "url" as above)
  {"op": "quit"}                        ends LibreOffice and this driver
"""
import json
import os
import signal
import subprocess
import sys
import time

import uno
from com.sun.star.beans import PropertyValue


def props(**kw):
    out = []
    for k, v in kw.items():
        p = PropertyValue()
        p.Name = k
        p.Value = v
        out.append(p)
    return tuple(out)


def url_of(path):
    return uno.systemPathToFileUrl(os.path.abspath(path))


def target_of(req, ctx):
    """The URL and the load arguments of a request's document. A WebDAV login is put in LibreOffice's
    password container for the server (for this run only), where its own interaction handler finds it
    when the server asks, as it does for a password a person saved."""
    if "url" not in req:
        return url_of(req["path"]), {}
    smgr = ctx.ServiceManager
    handler = smgr.createInstanceWithContext("com.sun.star.task.InteractionHandler", ctx)
    if req.get("user") is not None:
        server = "http://" + req["url"].split("://", 1)[1].split("/", 1)[0]
        passwords = smgr.createInstanceWithContext("com.sun.star.task.PasswordContainer", ctx)
        passwords.add(server, req["user"], (req["password"],), handler)
    return req["url"], {"InteractionHandler": handler}


def answer(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def main():
    profile = os.path.abspath(sys.argv[1])
    pipe = "cloudlib_lo_%d" % os.getpid()
    soffice = subprocess.Popen(
        ["soffice", "--headless", "--invisible", "--norestore", "--nologo", "--nodefault",
         "-env:UserInstallation=" + uno.systemPathToFileUrl(profile),
         "--accept=pipe,name=%s;urp;StarOffice.ComponentContext" % pipe],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        # Its own process group (soffice starts soffice.bin as a child): ended as a whole at the end.
        start_new_session=True)
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    ctx = None
    # Waits for soffice to listen; the test's own time-out bounds this (it names what it waited for).
    while ctx is None:
        if soffice.poll() is not None:
            answer(error="soffice exited with %d before it listened" % soffice.returncode)
            return
        try:
            ctx = resolver.resolve("uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe)
        except Exception:
            time.sleep(0.2)
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    answer(ok="ready", group=soffice.pid)
    doc = None
    try:
        for line in sys.stdin:
            req = json.loads(line)
            op = req.get("op")
            try:
                if op == "new":
                    d = desktop.loadComponentFromURL("private:factory/swriter", "_blank", 0, props(Hidden=True))
                    d.getText().setString(req["text"])
                    d.storeToURL(url_of(req["path"]), props(FilterName="writer8"))
                    d.close(True)
                    answer(ok=True)
                elif op == "open":
                    if doc is not None:
                        raise RuntimeError("a document is open already")
                    url, extra = target_of(req, ctx)
                    doc = desktop.loadComponentFromURL(url, "_blank", 0, props(Hidden=True, **extra))
                    if doc is None:
                        raise RuntimeError("LibreOffice did not open " + url)
                    answer(ok=bool(doc.isReadonly()) and "read-only" or "editing")
                elif op == "edit":
                    doc.getText().setString(req["text"])
                    answer(ok=True)
                elif op == "store":
                    doc.store()
                    answer(ok=True)
                elif op == "close":
                    doc.close(True)
                    doc = None
                    answer(ok=True)
                elif op == "text":
                    url, extra = target_of(req, ctx)
                    d = desktop.loadComponentFromURL(url, "_blank", 0, props(Hidden=True, ReadOnly=True, **extra))
                    text = d.getText().getString()
                    d.close(True)
                    answer(ok=text)
                elif op == "quit":
                    answer(ok=True)
                    break
                else:
                    answer(error="unknown op %r" % op)
            except Exception as e:  # an answer, not a crash: the test says what failed
                answer(error="%s: %s" % (type(e).__name__, getattr(e, "Message", None) or e))
    finally:
        try:
            if doc is not None:
                doc.close(True)
            desktop.terminate()
        except Exception:
            pass
        try:
            soffice.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(soffice.pid, signal.SIGKILL)  # whatever of it is left
        except ProcessLookupError:
            pass


main()
